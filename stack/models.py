"""The models of a stack file's parts: accelerator pools and shapes, and trainer images.

Frozen pydantic models with the stack file's camelCase keys; each checks its
own rules (below) when it is validated. `stack/config.py` assembles them into
the `StackConfig`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, RootModel, Strict, model_validator
from pydantic.alias_generators import to_camel

from core import catalog
from core.catalog import CatalogError
from core.names import MAX_RUN_DURATION_SECONDS
from core.syntax import DNS_1035_LABEL, IMAGE_DIGEST_REF, RESERVATION
from core.trainers import TRAINERS
from stack.problems import MISSING, Problem, raise_problems

Capacity = Literal["on-demand", "spot", "reservation", "flex-start", "queued"]
CAPACITIES: tuple[str, ...] = ("on-demand", "spot", "reservation", "flex-start", "queued")

# GKE caps node pool names at 40 characters; slices add "-s<N>".
POOL_NAME_MAX = 32


# A count of the stack file: a whole number, never YAML's `true` (which
# pydantic's lax int would take as 1), a float or a quoted number.
Count = Annotated[int, Strict()]


def _from_cli_text(value: Any) -> Any:
    # The CLI hands a top-level key to the program as text ("2"); structured
    # values (pools, runs) keep their JSON numbers and get no such leeway.
    return int(value) if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value) else value


# A count at the top level of the stack file, as the CLI or the file gives it.
TopLevelCount = Annotated[int, BeforeValidator(_from_cli_text), Strict()]

# A yes-or-no of the stack file: true or false, never the text "yes", "on" or "1" (which pydantic's lax bool
# would take, and the CLI hands over as text: stack/yaml_loader.py).
Flag = Annotated[bool, Strict()]


def _flag_from_cli_text(value: Any) -> Any:
    # A top-level boolean reaches the program as the text "true" or "false" (the CLI's only two).
    return {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value


# A yes-or-no at the top level of the stack file, as the CLI or the file gives it.
TopLevelFlag = Annotated[bool, BeforeValidator(_flag_from_cli_text), Strict()]


class StackModel(BaseModel):
    """A part of the stack file: unknown keys rejected, immutable, camelCase keys."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class Autoscaling(StackModel):
    """Total node count bounds of one GKE node pool (one slice)."""

    min_nodes: Count = Field(default=0, ge=0, description="0 lets an idle pool scale to zero")
    max_nodes: Count | None = Field(
        default=None, ge=1, description="default: the VMs of one slice (TPU) or 1 (GPU)"
    )


class ShapeConfig(StackModel):
    """An accelerator shape and how its capacity is obtained (Autopilot `shapes:`)."""

    name: str = Field(pattern=DNS_1035_LABEL, max_length=POOL_NAME_MAX)
    accelerator: str
    topology: str | None = None
    machine_type: str | None = None
    slices: Count = Field(default=1, ge=1)
    capacity: Capacity = "on-demand"
    reservation: str | None = None

    @model_validator(mode="after")
    def _shape_rules(self) -> ShapeConfig:
        raise_problems(shape_problems(self))
        return self

    def shape(self) -> catalog.Shape:
        return catalog.lookup(self.accelerator, self.topology, self.machine_type)


class PoolQuota(StackModel):
    """`quota` of a pool: this stack's share of it, as its ClusterQueue's quota (stack/sharing.py)."""

    chips: Count = Field(ge=0, description="the stack's nominal quota of the pool's chips")
    # The ClusterQueues that share a pool are in one cohort (stack/sharing.py): what this one may borrow of the
    # others' idle quota of the pool, and lend of its own. None: no limit (a lender reclaims what it lent).
    borrowing_limit_chips: Count | None = Field(default=None, ge=0,
                                                description="chips borrowed at most; default: no limit")
    lending_limit_chips: Count | None = Field(default=None, ge=0, description="chips lent at most; default: no limit")


class PoolConfig(ShapeConfig):
    """A Standard-mode accelerator node pool (`pools:`); `slices` node pools of one shape."""

    zones: tuple[str, ...] = Field(default=(), description="node locations; default: `zones`")
    autoscaling: Autoscaling = Autoscaling()
    boot_disk_gb: int | None = Field(
        default=None, ge=10, le=65536, description="boot disk size in GB (GKE: at least 10); default: the catalog's"
    )

    max_run_duration_seconds: Count | None = Field(
        default=None, ge=1, le=MAX_RUN_DURATION_SECONDS,
        description="queued only: the longest a provisioned slice runs (GKE's cap and default: 7 days)",
    )

    # An existing cluster's pool (stack/existing.py): the GKE node pool it is, or one per slice.
    node_pool: str | None = Field(default=None, description="existing cluster only: the GKE node pool's name")
    node_pools: tuple[str, ...] = Field(default=(), description="existing cluster only: one GKE node pool per slice")
    # A pool other stacks share: this stack's part of it (stack/sharing.py). None: the whole pool.
    quota: PoolQuota | None = None

    @model_validator(mode="after")
    def _pool_rules(self) -> PoolConfig:
        raise_problems(autoscaling_problems(self) + run_duration_problems(self))
        return self

    def max_run_duration(self) -> int:
        return self.max_run_duration_seconds or MAX_RUN_DURATION_SECONDS

    def max_nodes(self) -> int:
        if self.autoscaling.max_nodes is not None:
            return self.autoscaling.max_nodes
        return self.shape().vms_per_slice

    def disk_gb(self) -> int:
        return self.boot_disk_gb or self.shape().machine.boot_disk_gb

    def described_node_pools(self) -> tuple[str, ...]:
        """The GKE node pools an existing cluster's pool names (`nodePool`, then `nodePools`)."""
        return ((self.node_pool,) if self.node_pool else ()) + self.node_pools


class Images(RootModel[dict[str, str]]):
    """Trainer images pinned by digest (`repo/name@sha256:<64 hex>`), by trainer name; never by tag."""

    root: dict[str, str] = {}
    model_config = ConfigDict(frozen=True)

    @model_validator(mode="after")
    def _digests(self) -> Images:
        problems = [
            Problem(name, self.root[name], "is the image of no trainer", ", ".join(TRAINERS))
            for name in self.root if name not in TRAINERS
        ]
        problems += [
            Problem(name, ref, "is not a digest reference",
                    "<registry>/<path>@sha256:<64 hex>, pinned by digest, never a tag")
            for name, ref in self.root.items()
            if not IMAGE_DIGEST_REF.fullmatch(ref)
        ]
        raise_problems(problems)
        return self

    def by_trainer(self) -> dict[str, str]:
        return dict(self.root)


# --- the rules of one pool or shape -----------------------------------------------------

def shape_problems(s: ShapeConfig) -> list[Problem]:
    if s.accelerator not in catalog.ACCELERATORS:
        return [Problem("accelerator", s.accelerator, "is unknown", str(sorted(catalog.ACCELERATORS)))]
    try:
        shape = s.shape()
    except CatalogError as err:
        return [Problem(err.key, err.value, err.why, err.allowed)]
    problems = []
    if s.slices > 1 and not shape.multislice_capable:
        problems.append(Problem(
            "slices", s.slices, f"needs a multi-host TPU slice, and {shape.description} is not one",
            "1, or a multi-host topology",
        ))
    if s.capacity == "reservation" and not s.reservation:
        problems.append(Problem("reservation", MISSING, "and capacity 'reservation' needs the reservation name",
                                "<name> or projects/<project>/reservations/<name>"))
    if s.reservation and s.capacity != "reservation":
        problems.append(Problem(
            "reservation", s.reservation, f"can't be combined with capacity {s.capacity!r}",
            "capacity 'reservation' (spot, flex-start and queued exclude reservations)",
        ))
    if s.reservation and not RESERVATION.fullmatch(s.reservation):
        problems.append(Problem("reservation", s.reservation, "is not a reservation name",
                                "<name> or projects/<project>/reservations/<name>"))
    return problems


def run_duration_problems(p: PoolConfig) -> list[Problem]:
    if p.max_run_duration_seconds is not None and p.capacity != "queued":
        return [Problem("maxRunDurationSeconds", p.max_run_duration_seconds, f"with capacity {p.capacity!r}",
                        "capacity 'queued' (the ProvisioningRequest's run duration), or no maxRunDurationSeconds")]
    return []


def autoscaling_problems(p: PoolConfig) -> list[Problem]:
    try:
        shape = p.shape()
    except CatalogError:
        return []  # reported by the shape rules
    a, problems = p.autoscaling, []
    top = p.max_nodes()
    if a.min_nodes > top:
        problems.append(Problem("autoscaling.minNodes", a.min_nodes, f"exceeds maxNodes {top}", f"0..{top}"))
    if shape.multi_host and (top != shape.vms_per_slice or a.min_nodes not in (0, top)):
        # A multi-host slice is atomic: its pool has exactly the slice's VMs or none.
        problems.append(Problem(
            "autoscaling", f"{a.min_nodes}..{top}", f"nodes for {shape.description}",
            f"minNodes 0 or {shape.vms_per_slice}, maxNodes {shape.vms_per_slice}",
        ))
    if p.capacity in ("queued", "flex-start") and a.min_nodes != 0:
        problems.append(Problem(
            "autoscaling.minNodes", a.min_nodes, f"with capacity {p.capacity!r}",
            "0 (nodes exist only while a request holds them)",
        ))
    return problems


