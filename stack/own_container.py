"""A run of one's own container: no `trainer`, an `image` by digest, a `command` (with `args`).

It gets what a trainer's run gets (manifests/run.py builds both): the JobSet with its failure
policy and restarts, Kueue's labels and ladders, the bucket's prefixes mounted with their grants
(their paths in GKE_FINETUNE_DATA, GKE_FINETUNE_CHECKPOINTS, GKE_FINETUNE_PROFILES), the trainer
service account (Workload Identity), the Hugging Face token as a file when `hfToken: true`, and its
pool's TPU or GPU environment (core/trainers.py `own_container_row`). Its exit codes mean what the
trainers' mean: 78 ends the run at once, anything else restarts it (trainers/exit_codes.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from core.images import image_problem
from stack.models import Count, StackModel
from stack.problems import MISSING, Problem

_DIGEST = "<registry>/<repository>@sha256:<64 hex digits>, not a tag"


class RunAs(StackModel):
    """The uid and gid a container runs as, where its image is not meant to run as root."""

    user: Count = Field(ge=0, description="uid")
    group: Count = Field(ge=0, description="gid")


def own_container_problems(run: Any, where: str) -> list[Problem]:
    """The rules of a run without trainer, and of the keys only such a run may set."""
    if run.trainer is not None:
        problems = [Problem(key, value, f"{where}: trainer {run.trainer} is started by its image's own command",
                            f"`{key}` only on a run of your own container (no trainer)")
                    for key, value in (("command", list(run.command)), ("hfToken", run.hf_token),
                                       ("runAs", run.run_as)) if value]
        return problems
    if not run.command:
        return [Problem("trainer", MISSING, f"{where}: a run needs a trainer, or an image and a command",
                        "trainer: one of the trainer table's, or image (by digest) and command")]
    if run.image is None:
        return [Problem("image", MISSING, f"{where}: a run of your own container needs its image", _DIGEST)]
    if image_problem(run.image):
        return [Problem("image", run.image, f"{where} must be pinned by digest", _DIGEST)]
    return []
