"""The rules a stack config must satisfy, and how problems are worded.

Each rule returns one line per problem: `<key>: <value> <what is wrong>; allowed: <what is>`.
Pure functions over the models of infra/config.py and infra/config_models.py; no Pulumi import.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import ValidationError

from infra import accelerators as catalog
from infra.accelerators import CatalogError

if TYPE_CHECKING:
    from infra.config import StackConfig
    from infra.config_models import PoolConfig, ShapeConfig

# https://cloud.google.com/resource-manager/docs/creating-managing-projects#before_you_begin
PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
ZONE = re.compile(r"^(?P<region>[a-z]+-[a-z]+[0-9]+)-[a-z]$")
# https://cloud.google.com/compute/docs/instances/reservations-shared#consuming_shared_reservations
RESERVATION = re.compile(r"^(projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")

def raise_problems(problems: list[str]) -> None:
    """Raise a validator's problems as one ValueError, one line each (problem_lines splits them)."""
    if problems:
        raise ValueError("\n".join(problems))


def shape_problems(s: ShapeConfig) -> list[str]:
    if s.accelerator not in catalog.ACCELERATORS:
        return [f"accelerator: {s.accelerator!r} is unknown; allowed: {sorted(catalog.ACCELERATORS)}"]
    try:
        shape = s.shape()
    except CatalogError as err:
        key = "machineType" if "machine type" in str(err) else "topology"
        return [f"{key}: {err}"]
    problems = []
    if s.slices > 1 and not shape.multislice_capable:
        problems.append(
            f"slices: {s.slices} needs a multi-host TPU slice, and {shape.description} is not one; "
            "allowed: 1, or a multi-host topology"
        )
    if s.capacity == "reservation" and not s.reservation:
        problems.append("reservation: missing; capacity 'reservation' needs the reservation name")
    if s.reservation and s.capacity != "reservation":
        problems.append(
            f"reservation: {s.reservation!r} can't be combined with capacity {s.capacity!r}; "
            "allowed: capacity 'reservation' (spot, flex-start and queued exclude reservations)"
        )
    if s.reservation and not RESERVATION.match(s.reservation):
        problems.append(
            f"reservation: {s.reservation!r} is not a reservation name; "
            "allowed: <name> or projects/<project>/reservations/<name>"
        )
    return problems


def autoscaling_problems(p: PoolConfig) -> list[str]:
    try:
        shape = p.shape()
    except CatalogError:
        return []  # reported by the shape rules
    a, problems = p.autoscaling, []
    top = p.max_nodes()
    if a.min_nodes > top:
        problems.append(f"autoscaling.minNodes: {a.min_nodes} exceeds maxNodes {top}")
    if shape.multi_host and (top != shape.vms_per_slice or a.min_nodes not in (0, top)):
        # A multi-host slice is atomic: its pool has exactly the slice's VMs or none.
        problems.append(
            f"autoscaling: {a.min_nodes}..{top} nodes for {shape.description}; "
            f"allowed: minNodes 0 or {shape.vms_per_slice}, maxNodes {shape.vms_per_slice}"
        )
    if p.capacity in ("queued", "flex-start") and a.min_nodes != 0:
        problems.append(
            f"autoscaling.minNodes: {a.min_nodes} with capacity {p.capacity!r}; allowed: 0 "
            "(nodes exist only while a request holds them)"
        )
    return problems


def stack_problems(c: StackConfig) -> list[str]:
    problems = [] if c.bucket_name else bucket_problems("bucketName (derived)", c.data_bucket)
    problems += _mode_problems(c)
    problems += _unique_names(c)
    problems += _runs_problems(c)
    return problems


def _mode_problems(c: StackConfig) -> list[str]:
    if c.autopilot:
        problems = []
        if c.pools:
            problems.append(
                f"pools: {len(c.pools)} pool(s) declared in autopilot mode; allowed: none "
                "(Autopilot provisions accelerator nodes from the runs' selectors; declare `shapes:`)"
            )
        problems += [
            f"shapes[{i}].capacity: 'queued' on Autopilot; allowed: on-demand, spot, reservation, flex-start"
            for i, s in enumerate(c.shapes)
            if s.capacity == "queued"
        ]
        return problems
    problems = []
    if c.shapes:
        problems.append(
            f"shapes: {len(c.shapes)} shape(s) declared in standard mode; allowed: none (declare `pools:`)"
        )
    return problems


def zone_problems(key: str, zones: tuple[str, ...], region: str | None) -> list[str]:
    problems = []
    for j, zone in enumerate(zones):
        m = ZONE.match(zone)
        if not m or (region and m.group("region") != region):
            where = f"region {region!r}" if region else "a valid region"
            problems.append(f"{key}[{j}]: {zone!r} is not a zone of {where}; allowed: {region or '<region>'}-<letter>")
    return problems


def bucket_problems(key: str, name: str) -> list[str]:
    sep = ": " if key else ""
    """https://cloud.google.com/storage/docs/buckets#naming (names without dots)."""
    rules = [
        (3 <= len(name) <= 63, "3 to 63 characters"),
        (re.fullmatch(r"[a-z0-9][a-z0-9_-]*[a-z0-9]", name) is not None,
         "lowercase letters, digits, '-' and '_', starting and ending with a letter or digit"),
        (not name.startswith("goog") and "google" not in name, "no 'goog' prefix and no 'google'"),
    ]
    return [f"{key}{sep}{name!r} breaks GCS bucket naming; allowed: {rule}" for ok, rule in rules if not ok]


def _unique_names(c: StackConfig) -> list[str]:
    key = "shapes" if c.autopilot else "pools"
    seen: set[str] = set()
    problems = []
    for i, group in enumerate(c.accelerator_groups()):
        if group.name in seen:
            problems.append(f"{key}[{i}].name: {group.name!r} is used twice; allowed: unique names")
        seen.add(group.name)
    return problems


def _runs_problems(c: StackConfig) -> list[str]:
    """Runs checked against the contracts of the pools/shapes they name.
    The run rules live with the runs, in workloads/spec.py."""
    from infra.scheduling import derive_contracts  # noqa: PLC0415 (import cycle)
    from workloads.spec import validate_runs  # noqa: PLC0415

    if not c.runs:
        return []
    return list(validate_runs(c.runs, derive_contracts(c)))


def problem_lines(err: ValidationError) -> list[str]:
    lines = []
    for e in err.errors():
        path = _path(e["loc"])
        if e["type"] == "value_error":
            for line in str(e["ctx"]["error"]).splitlines():
                lines.append(_join(path, line))
        elif e["type"] == "extra_forbidden":
            lines.append(f"{path}: unknown key; check the spelling against Pulumi.yaml")
        else:
            lines.append(f"{path}: {e.get('input')!r} {e['msg'].lower()}")
    return lines


# A validator line starting with `key:` or `[i]:` is relative to the validated
# value's path; any other line is about the value itself.
_RELATIVE = re.compile(r"^([A-Za-z][\w.-]*|\[\d+\])[^ ]*: ")
_TOP_LEVEL_ALIASES = {"project": "gcp:project", "region": "gcp:region"}


def _join(path: str, line: str) -> str:
    if not path:
        return line
    if _RELATIVE.match(line):
        return f"{path}{line}" if line.startswith("[") else f"{path}.{line}"
    return f"{path}: {line}"


def _path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else _TOP_LEVEL_ALIASES.get(str(part), str(part))
    return out
