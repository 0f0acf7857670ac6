"""Collecting a stack's plan: the real program run under the SDK's mocks (tools/offline.py), its
resources, outputs, costs, fit, memory, manifests, Kueue objects, access and Google API requests as
JSON-ready data, secrets masked (tools/plan/__init__.py)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from unittest import mock

from tools.plan.cost import cost
from tools.plan.google_api import GoogleApiProblems, google_requests
from tools.plan.hbm import hbm_rows
from tools.plan.memory import memory_rows
from tools.stacks import stack_files

ROOT = Path(__file__).resolve().parents[2]

SECRET = "[secret]"
# The wire form of a Pulumi secret value (pulumi.runtime.rpc's secret signature).
_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
# Stand-in for secret config values; never printed (masked wherever it appears).
_SECRET_PLACEHOLDER = "offline-plan-secret-value"
_STACK_TYPE = "pulumi:pulumi:Stack"
# tools.offline.SECURE_STAND_IN, the stand-in of a stack file's `secure:` value (masked too).
_SECURE_STAND_IN = "offline-stand-in-for-an-encrypted-value"


class PlanError(Exception):
    """The stack could not be planned; `problems` holds one line each. `unreadable`: its file isn't a
    stack file at all (a YAML error), said in the one line `<file>:<line>:<column>: <what>`."""

    def __init__(self, problems: list[str], unreadable: bool = False):
        self.problems = problems
        self.unreadable = unreadable
        super().__init__("\n".join(problems))


# --- collecting -------------------------------------------------------------------------


def mask(value: Any, secrets: tuple[str, ...] = (_SECRET_PLACEHOLDER, _SECURE_STAND_IN)) -> Any:
    """`value` with secret values (wire-marked or equal to a secret) replaced by [secret]."""
    if isinstance(value, Mapping):
        if value.get(_SECRET_SIG_KEY) == _SECRET_SIG:
            return SECRET
        return {k: mask(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask(v, secrets) for v in value]
    if isinstance(value, str) and any(s and s in value for s in secrets):
        return SECRET
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the wire form turns every number into a float
    return value


def collect(stack: str, root: Path = ROOT, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """Plan `stack` of the tree at `root` as JSON-ready data (secrets already masked).

    The stack has the secrets its file holds (`secure:` values) and those
    named in `secrets` (keys of the project, e.g. "hfToken"), as a deployment
    that sets them (`pulumi config set --secret`, or a workflow from a
    repository secret) would; a stand-in value is planned for each.

    The project's modules are imported from `root`, so `root` must be first on
    sys.path and no project module may be imported yet (`main` sees to it).
    """
    from tools import offline, stacks

    if not (root / f"Pulumi.{stack}.yaml").is_file():
        raise PlanError([f"no stack file Pulumi.{stack}.yaml; stacks: {list(stacks.stack_files(root))}"])
    # The planned tree's own modules (`root` is first on sys.path).
    manifests_module = importlib.import_module("manifests.run")
    reader = importlib.import_module("stack.reader")
    problems = importlib.import_module("stack.problems")
    fit_module = importlib.import_module("admission.check")

    manifests: dict[str, dict] = {}
    real_build_run = getattr(manifests_module, "build_run", None)

    def build_run(*args, **kwargs):
        manifest = real_build_run(*args, **kwargs)
        manifests[manifest["metadata"]["name"]] = manifest
        return manifest

    given = {f"{offline.PROJECT}:{key}": _SECRET_PLACEHOLDER for key in secrets}
    with ExitStack() as patches:
        if real_build_run is not None:
            patches.enter_context(mock.patch.object(manifests_module, "build_run", build_run))
        try:
            deployment = offline.run_stack(stack, secrets=given, root=root)
        except problems.ConfigError as err:
            # The tree's own classes (an older tree has neither the class nor the attribute).
            unreadable = type(err).__name__ == "StackFileError" or getattr(err, "unreadable", False) is True
            raise PlanError(list(err.problems), unreadable) from None
        except Exception as err:  # noqa: BLE001 (any validation error of the program)
            raise PlanError([f"{type(err).__name__}: {err}"]) from None

    # What each Google Cloud resource would send to Google, judged by Google's API definitions
    # before anything is declared for real (admission/google_api).
    try:
        google = google_requests(deployment)
    except GoogleApiProblems as err:
        raise PlanError(err.problems) from None
    config = deployment.config  # what the program's reader validated: the stack is read and checked once
    collisions = _collisions(stack, config, root, reader)
    if collisions:
        raise PlanError(collisions)
    declared = manifests or _declared_manifests(deployment)
    return {
        "stack": stack,
        "resources": [_resource_row(r) for r in deployment.resources],
        "outputs": mask(deployment.outputs),
        "cost": cost(config),
        "fit": fit_module.fit_table(config),
        "hbm": hbm_rows(config, declared),
        "model_memory": memory_rows(config, declared),
        "manifests": mask(declared),
        "kueue": _kueue_objects(config),
        "renamed": _renamed(config),
        "serve": _serve_objects(config),
        "access": _access(config, deployment),
        "google": google,
        "pod_security": _pod_security(config),
    }


def _serve_objects(config) -> dict:
    """The model server's objects (`serve:`), as the program declares them; none in a tree from before it."""
    try:
        serving = importlib.import_module("admission.serving")
    except ImportError:
        return {}
    return mask(serving.serve_manifests(config))


def _collisions(stack: str, config, root: Path, reader) -> list[str]:
    """The names `stack` would claim that another stack file of the tree claims too (stack/global_names.py);
    a stack file that doesn't load is left to its own plan."""
    try:
        names = importlib.import_module("stack.global_names")
    except ImportError:  # a tree from before the check
        return []
    configs = {stack: config}
    for other in stack_files(root):
        if other != stack:
            try:
                configs[other] = reader.load_files(other, root)
            except Exception:  # noqa: BLE001 (any problem of that file: its own plan reports it)
                continue
    return names.collision_problems(stack, configs)


def _access(config, deployment) -> list[str]:
    """What can reach the control plane, and what the control plane may reach on the nodes."""
    network, existing = getattr(config, "network", None), getattr(config, "existing", None)
    if existing is not None:
        named = f"context {existing.context}" if existing.context else f"{existing.name} in {existing.location}"
        lines = [f"control plane: an existing cluster's ({named}), as the platform team set it up"]
    elif hasattr(network, "control_plane_access"):
        lines = [f"control plane: {network.control_plane_access()}"]
    else:
        lines = []
    for rule in (r for r in deployment.resources if r.type == "gcp:compute/firewall:Firewall"):
        ports = ", ".join(f"{a['protocol']}:{p}" for a in rule.inputs.get("allows", []) for p in a.get("ports", []))
        lines.append(f"firewall {rule.inputs.get('name')}: the control plane to nodes tagged "
                     f"{', '.join(rule.inputs.get('targetTags', []))} on {ports} (the controllers' webhooks)")
    return lines


def _pod_security(config) -> dict[str, Any]:
    """The Pod Security level each of the stack's pods needs, and so its namespace (none in an older tree)."""
    try:
        needs = importlib.import_module("admission.namespace_needs")
    except ImportError:
        return {}
    rows = [{"what": n.pods.what, "level": n.level, "why": n.why() if n.refused else ""}
            for n in needs.level_needs(needs.stack_pod_sets(config))]
    return {"namespace": config.runs_namespace, "level": needs.needed_level(config),
            "declared": bool(getattr(config, "creates_namespace", False)), "pods": rows}


def _renamed(config) -> list[str]:
    """`<kind> <old name> -> <new name>` for each cluster-scoped object whose name now carries a hash of its
    namespace and name (core/names.py `cluster_scoped`); none in a tree from before the hash."""
    try:
        builder = importlib.import_module("manifests.kueue")
    except ImportError:
        return []
    if not hasattr(builder, "renamed_from") or not hasattr(config, "compute_class_renames"):
        return []
    lines = []
    for new, old in builder.renamed_from(config.kueue_flavors()).items():
        kind, _, name = new.partition("-")
        lines.append(f"{kind} {old.partition('-')[2]} -> {name}")
    lines += [f"computeclass {old} -> {new}" for new, old in config.compute_class_renames().items() if old != new]
    return lines


def _kueue_objects(config) -> dict[str, dict]:
    """The planned tree's Kueue objects (none in a tree without Kueue, or a stack that needs none)."""
    try:
        builder = importlib.import_module("manifests.kueue")
    except ImportError:
        return {}
    flavors = config.kueue_flavors() if hasattr(config, "kueue_flavors") else []
    return builder.kueue_manifests(flavors)


def _resource_row(r) -> dict[str, Any]:
    return {
        "urn": r.urn,
        "type": r.type,
        "name": r.name,
        "parent": "" if _is_stack(r.parent) else r.parent,
        "protect": r.protect,
        "retainOnDelete": r.retain_on_delete,
        "replaceOnChanges": list(r.replace_on_changes),
        "inputs": mask(r.inputs),
    }


def _is_stack(urn: str) -> bool:
    """Whether a parent URN is the stack itself (urn:pulumi:<stack>::<project>::<type>::<name>)."""
    parts = urn.split("::")
    return len(parts) < 3 or parts[2] == _STACK_TYPE


def _declared_manifests(deployment) -> dict[str, dict]:
    """Job/JobSet inputs as declared, for a program whose builders could not be captured."""
    kinds = ("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "kubernetes:batch/v1:Job")
    return {
        r.inputs.get("metadata", {}).get("name", r.name): r.inputs
        for r in deployment.resources
        if r.type in kinds
    }


