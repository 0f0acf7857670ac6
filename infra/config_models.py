"""The models of a stack file's parts: accelerator pools and shapes, and trainer images.

Frozen pydantic models with the stack file's camelCase keys; each checks its
own rules (infra/config_rules.py) when it is validated. `infra/config.py`
assembles them into the `StackConfig` and re-exports them.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from infra import accelerators as catalog
from infra.config_rules import autoscaling_problems, raise_problems, shape_problems

Capacity = Literal["on-demand", "spot", "reservation", "flex-start", "queued"]
CAPACITIES: tuple[str, ...] = ("on-demand", "spot", "reservation", "flex-start", "queued")

DNS_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
IMAGE_DIGEST = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+@sha256:[0-9a-f]{64}$")
# GKE caps node pool names at 40 characters; slices add "-s<N>".
POOL_NAME_MAX = 32


class StackModel(BaseModel):
    """A part of the stack file: unknown keys rejected, immutable, camelCase keys."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class Autoscaling(StackModel):
    """Total node count bounds of one GKE node pool (one slice)."""

    min_nodes: int = Field(default=0, ge=0, description="0 lets an idle pool scale to zero")
    max_nodes: int | None = Field(
        default=None, ge=1, description="default: the VMs of one slice (TPU) or 1 (GPU)"
    )


class ShapeConfig(StackModel):
    """An accelerator shape and how its capacity is obtained (Autopilot `shapes:`)."""

    name: str = Field(pattern=DNS_LABEL, max_length=POOL_NAME_MAX)
    accelerator: str
    topology: str | None = None
    machine_type: str | None = None
    slices: int = Field(default=1, ge=1)
    capacity: Capacity = "on-demand"
    reservation: str | None = None

    @model_validator(mode="after")
    def _shape_rules(self) -> ShapeConfig:
        raise_problems(shape_problems(self))
        return self

    def shape(self) -> catalog.Shape:
        return catalog.lookup(self.accelerator, self.topology, self.machine_type)


class PoolConfig(ShapeConfig):
    """A Standard-mode accelerator node pool (`pools:`); `slices` node pools of one shape."""

    zones: tuple[str, ...] = Field(default=(), description="node locations; default: `zones`")
    autoscaling: Autoscaling = Autoscaling()

    @model_validator(mode="after")
    def _pool_rules(self) -> PoolConfig:
        raise_problems(autoscaling_problems(self))
        return self

    def max_nodes(self) -> int:
        if self.autoscaling.max_nodes is not None:
            return self.autoscaling.max_nodes
        return self.shape().vms_per_slice


class Images(StackModel):
    """Trainer images, by digest (`repo/name@sha256:<64 hex>`), never by tag."""

    gemma_jax: str | None = Field(default=None, alias="gemma-jax")
    trl_gpu: str | None = Field(default=None, alias="trl-gpu")

    @model_validator(mode="after")
    def _digests(self) -> Images:
        bad = [
            f"{alias}: {ref!r} is not a digest reference; allowed: <registry>/<path>@sha256:<64 hex> (no tags, no :latest)"
            for alias, ref in (("gemma-jax", self.gemma_jax), ("trl-gpu", self.trl_gpu))
            if ref is not None and not IMAGE_DIGEST.match(ref)
        ]
        raise_problems(bad)
        return self

    def by_trainer(self) -> dict[str, str]:
        return {k: v for k, v in (("gemma-jax", self.gemma_jax), ("trl-gpu", self.trl_gpu)) if v}
