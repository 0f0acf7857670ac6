"""The stack's configuration, read once and validated before any resource exists.

`load()` is the only code in the project that reads Pulumi config. It collects
every key of the project namespace (so a misspelt key is an error, not a
silent default), parses it into the frozen `StackConfig` below and raises one
`ConfigError` listing every problem, one line each:
`<key path>: <value> <what is wrong>; allowed: <what is>`.

The models themselves import nothing from Pulumi: tests and the offline plan
build a `StackConfig` from a plain dict with `StackConfig.from_mapping`.
Defaults live here and, for pools, shapes and images, in
infra/config_models.py; Pulumi.yaml declares the same keys and defaults
(tests/infra/test_config.py keeps the two in step).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from infra.accelerators import Family
from infra.config_models import (
    CAPACITIES,
    DNS_LABEL,
    POOL_NAME_MAX,
    Autoscaling,
    Capacity,
    Images,
    PoolConfig,
    ShapeConfig,
    StackModel,
)
from infra.config_rules import (
    PROJECT_ID,
    REGION,
    bucket_problems,
    problem_lines,
    raise_problems,
    stack_problems,
    zone_problems,
)
from infra.ids import default_bucket_name
from infra.imagespec import IMAGE_BUILDERS, ImageBuilder
from workloads.spec import RunConfig

PROJECT = "gke-finetune"


class ConfigError(ValueError):
    """The stack file is invalid. `problems` holds one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(
            "invalid stack configuration:\n" + "\n".join(f"  - {p}" for p in problems)
        )


class StackConfig(StackModel):
    """Everything one stack file says. Built only through validation; immutable."""

    project: str = Field(description="gcp:project")
    region: str = Field(description="gcp:region")
    stack: str = Field(default="dev", min_length=1, description="the Pulumi stack name")
    mode: Literal["standard", "autopilot"] = "standard"
    cluster_name: str = Field(default="finetune", pattern=DNS_LABEL, max_length=40)
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = "REGULAR"
    deletion_protection: bool = True
    system_machine_type: str = "e2-standard-4"
    system_node_count: int = Field(default=1, ge=1, description="per zone of the region")
    zones: tuple[str, ...] = Field(default=(), description="default node locations of pools")
    bucket_name: str = Field(default="", description="default: <project>-<stack>-finetune")
    registry_name: str = Field(default="finetune", pattern=DNS_LABEL, max_length=63)
    pools: tuple[PoolConfig, ...] = ()
    shapes: tuple[ShapeConfig, ...] = ()
    images: Images = Images()
    image_builder: ImageBuilder = Field(
        default="docker", description="how unpinned trainer images are built: docker | cloudbuild"
    )
    runs: tuple[RunConfig, ...] = ()

    @field_validator("project")
    @classmethod
    def _project_id(cls, value: str) -> str:
        if not PROJECT_ID.match(value):
            raise ValueError(
                f"{value!r} is not a project id; allowed: 6-30 lowercase letters, digits or "
                "hyphens, starting with a letter, not ending with a hyphen"
            )
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not REGION.match(value):
            raise ValueError(f"{value!r} is not a region; allowed: e.g. 'us-east5'")
        return value

    @field_validator("zones")
    @classmethod
    def _zones(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        raise_problems(zone_problems("", value, info.data.get("region")))
        return value

    @field_validator("image_builder", mode="before")
    @classmethod
    def _image_builder(cls, value: Any) -> Any:
        if value not in IMAGE_BUILDERS:
            allowed = " | ".join(IMAGE_BUILDERS)
            raise ValueError(f"{value!r} is not an image builder; allowed: {allowed}")
        return value

    @field_validator("bucket_name")
    @classmethod
    def _bucket(cls, value: str) -> str:
        raise_problems(bucket_problems("", value) if value else [])
        return value

    @field_validator("pools")
    @classmethod
    def _pools(cls, pools: tuple[PoolConfig, ...], info: ValidationInfo) -> tuple[PoolConfig, ...]:
        region, zones = info.data.get("region"), info.data.get("zones", ())
        problems = []
        for i, pool in enumerate(pools):
            if not (pool.zones or zones):
                problems.append(f"[{i}].zones: empty and no stack `zones`; allowed: zones of {region}")
            problems += zone_problems(f"[{i}].zones", pool.zones, region)
            if pool.shape().multi_host and len(pool.zones or zones) > 1:
                # A multi-host TPU slice lives in one zone.
                problems.append(
                    f"[{i}].zones: {list(pool.zones or zones)} for multi-host {pool.shape().description}; "
                    "allowed: exactly one zone"
                )
        raise_problems(problems)
        return pools

    @model_validator(mode="after")
    def _stack_rules(self) -> StackConfig:
        raise_problems(stack_problems(self))
        return self

    @property
    def data_bucket(self) -> str:
        return self.bucket_name or default_bucket_name(self.project, self.stack)

    @property
    def autopilot(self) -> bool:
        return self.mode == "autopilot"

    def accelerator_groups(self) -> tuple[ShapeConfig, ...]:
        """The named shapes runs may refer to: pools (Standard) or shapes (Autopilot)."""
        return self.shapes if self.autopilot else self.pools

    def pool_zones(self, pool: PoolConfig) -> tuple[str, ...]:
        return pool.zones or self.zones

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> StackConfig:
        """Validate a plain mapping (camelCase keys as in the stack file)."""
        try:
            return cls.model_validate(values)
        except ValidationError as err:
            raise ConfigError(problem_lines(err)) from None


# --- reading Pulumi config -----------------------------------------------------

# Keys whose stack value is structured; Pulumi hands them to the program as JSON.
_STRUCTURED = ("pools", "shapes", "images", "runs", "zones")
_NOT_MODEL_KEYS = ("hfToken",)


def load() -> StackConfig:
    """Read and validate the current stack's config; raise ConfigError on any problem."""
    import pulumi  # noqa: PLC0415 (the models stay importable without Pulumi)

    gcp = pulumi.Config("gcp")
    values: dict[str, Any] = {
        "project": gcp.get("project") or "",
        "region": gcp.get("region") or "",
        "stack": pulumi.get_stack(),
    }
    for key, raw in _project_keys().items():
        if key in _NOT_MODEL_KEYS:
            continue
        values[key] = _decode(key, raw)
    problems = []
    hf_key = f"{PROJECT}:hfToken"
    if pulumi.runtime.get_config(hf_key) is None:
        problems.append("hfToken: not set; run `pulumi config set --secret hfToken <token>`")
    elif not pulumi.runtime.is_config_secret(hf_key):
        problems.append(
            "hfToken: stored in plain text; allowed: a secret (`pulumi config set --secret hfToken <token>`)"
        )
    try:
        config = StackConfig.model_validate(values)
    except ValidationError as err:
        problems += problem_lines(err)
        config = None
    if problems:
        raise ConfigError(problems)
    return config


def hf_token():
    """The Hugging Face token as a Pulumi secret Output (validated by `load`)."""
    import pulumi  # noqa: PLC0415

    return pulumi.Config(PROJECT).require_secret("hfToken")


def _project_keys() -> dict[str, Any]:
    import pulumi.runtime.config as runtime_config  # noqa: PLC0415

    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = f"{PROJECT}:"
    return {k[len(prefix):]: v for k, v in merged.items() if k.startswith(prefix)}


def _decode(key: str, raw: Any) -> Any:
    if key in _STRUCTURED and isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw  # pydantic reports the type mismatch with the value
    return raw


__all__ = [
    "Autoscaling", "CAPACITIES", "Capacity", "ConfigError", "Family", "Images", "POOL_NAME_MAX",
    "PoolConfig", "ShapeConfig", "StackConfig", "hf_token", "load",
]
