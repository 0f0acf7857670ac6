"""The stack's secrets: the Hugging Face token, required only by runs whose trainer reads the Hub.

A trainer row says whether its runs read the Hugging Face Hub (models,
datasets) and so get the token mounted (`Trainer.hf_token`, core/trainers.py);
a stack with such a run must hold the token as a Pulumi secret, and a stack
without one needs no token at all (the TPU trainer reads its weights and data
from the bucket, never from the Hub). A token in plain text is refused
whether or not a run needs it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from core.trainers import OWN_CONTAINER, TRAINERS
from stack.problems import MISSING, Problem

HF_TOKEN_KEY = "hfToken"
# How the stack holds the token, as the reader finds it in Pulumi config.
TokenState = Literal["unset", "plain", "secret"]
SET_IT = "a secret: `pulumi config set --secret hfToken <token>`"


def runs_needing_hf_token(runs: Iterable[Any]) -> list[tuple[int, str, str]]:
    """(index, name, trainer) of each run whose trainer reads the Hub.

    `runs` are RunConfigs or the stack file's raw run mappings (so that the
    token is checked even when another key of a run is invalid).
    """
    found = []
    for index, run in enumerate(runs if isinstance(runs, (list, tuple)) else ()):
        trainer = run.get("trainer") if isinstance(run, dict) else getattr(run, "trainer", None)
        name = run.get("name") if isinstance(run, dict) else getattr(run, "name", None)
        row = TRAINERS.get(trainer) if isinstance(trainer, str) else None
        asks = run.get("hfToken") if isinstance(run, dict) else getattr(run, "hf_token", False)
        if row is not None and row.hf_token:
            found.append((index, str(name), trainer))
        elif trainer is None and asks is True:  # one's own container, asking for the token
            found.append((index, str(name), OWN_CONTAINER))
    return found


def datasets_needing_hf_token(datasets: Iterable[Any]) -> list[tuple[int, str]]:
    """(index, name) of each gated or private Hub dataset (`hub.token: true`), raw mappings or models."""
    found = []
    for index, d in enumerate(datasets if isinstance(datasets, (list, tuple)) else ()):
        hub = d.get("hub") if isinstance(d, dict) else getattr(d, "hub", None)
        token = hub.get("token") if isinstance(hub, dict) else getattr(hub, "token", False)
        name = d.get("name") if isinstance(d, dict) else getattr(d, "name", None)
        if token is True:
            found.append((index, str(name)))
    return found


def needs_hf_token(runs: Iterable[Any], datasets: Iterable[Any] = ()) -> bool:
    return bool(runs_needing_hf_token(runs) or datasets_needing_hf_token(datasets))


def hf_token_problems(runs: Iterable[Any], state: TokenState, datasets: Iterable[Any] = ()) -> list[Problem]:
    """The token's problems: plain text ever, unset when a run needs it (naming each such run)."""
    if state == "plain":
        return [Problem(HF_TOKEN_KEY, "[plain text]", "is stored in plain text", SET_IT)]
    if state == "secret":
        return []
    return [
        Problem(HF_TOKEN_KEY, MISSING,
                f"and run {name!r} (runs[{index}], trainer {trainer}) reads the Hugging Face Hub", SET_IT)
        for index, name, trainer in runs_needing_hf_token(runs)
    ] + [
        Problem(HF_TOKEN_KEY, MISSING, f"and dataset {name!r} (datasets[{index}]) is staged from the Hub with a token",
                SET_IT)
        for index, name in datasets_needing_hf_token(datasets)
    ]
