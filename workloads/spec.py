"""What a stack file says about one fine-tuning run (the `runs:` list)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TRAINERS = ("gemma-jax", "trl-gpu")


class RunConfig(BaseModel):
    """One run: which trainer, on which pool, with which arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="DNS-1123 label; names the Job/JobSet and the checkpoint prefix")
    trainer: Literal["gemma-jax", "trl-gpu"]
    pool: str = Field(description="the pool (Standard) or accelerator shape (Autopilot) it runs on")
    args: tuple[str, ...] = Field(default=(), description="trainer flags, passed through verbatim")
    profile: bool = Field(default=False, description="mount the profile prefix and enable XProf")
    suspend: bool = Field(default=False, description="declare the run suspended (JobSet spec.suspend)")
