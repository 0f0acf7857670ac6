"""The ladder controller (controllers/ladder.py) in the stack's namespace, and the ladder a run's JobSet carries.

A stack that has a run with a ladder of two rungs or more, each selected by one value of the pool label,
runs the controller: a ConfigMap holding its one file, run by Google's distroless Python image (the standard
library and nothing else, which is all the file needs) under a service account whose Role lists and patches
the namespace's Workloads and JobSets, deletes Workloads and writes Events: nothing cluster-wide, so each
team's stack runs its own next to its runs. The pod meets the `restricted` Pod Security Standard.

A ladder whose rung is an existing cluster's multislice pool (selected by several node pools' names: no
single value pins it) gets no controller; such a run is requeued as Kueue does (docs/capacity.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from controllers.ladder import LADDER
from core.catalog import NODEPOOL_LABEL
from core.contract import SchedulingContract
from core.names import APP_LABEL, PROJECT, SYSTEM_POOL
from manifests.kueue import manifest_key
from manifests.pod import SECCOMP, container_security_context
from stack.config import StackConfig
from stack.queueing import run_contract

NAME = f"{PROJECT}-ladder"
SCRIPT = Path(__file__).resolve().parent.parent / "controllers" / "ladder.py"
SCRIPT_KEY = "ladder.py"
MOUNT = "/ladder"
STATE = "/run/ladder"  # where it writes the times its probes read (an emptyDir: the root file system is read-only)
# Google's distroless Python 3 (Debian 12) as the non-root user 65532, pinned by digest; its entrypoint is
# `python3` (https://github.com/GoogleContainerTools/distroless/blob/main/python3/README.md). It is served by
# gcr.io, which a private cluster's nodes reach through Private Google Access as they reach Artifact Registry.
IMAGE = ("gcr.io/distroless/python3-debian12:nonroot"
         "@sha256:7d1042ce588ab97019fe95c24ffca7bc5a82ccdac572511d5e09bda4435c89c5")
NONROOT = 65532
POLL_SECONDS = 2
# What one Python process polling two lists needs; the limits equal the requests (Guaranteed QoS, and a
# namespace's LimitRange or ResourceQuota sees them).
RESOURCES = {"cpu": "50m", "memory": "64Mi"}
COMPONENT = {APP_LABEL: PROJECT, "app.kubernetes.io/component": "ladder"}


def ladder_annotation(contract: SchedulingContract) -> dict[str, str]:
    """The annotation the controller reads on a queued run's JobSet: the pool label and each rung's value;
    none where the ladder has one rung or a rung no single value selects."""
    if len(contract.rung_pins) < 2:
        return {}
    return {LADDER: json.dumps({"label": contract.pool_label, "rungs": list(contract.rung_pins)})}


def _meta(kind: str, api_version: str, namespace: str, **more: object) -> dict:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": NAME, "namespace": namespace, "labels": dict(COMPONENT)}, **more}


def role(namespace: str) -> dict:
    """Exactly what controllers/ladder.py calls: list and patch JobSets and Workloads, delete Workloads,
    create Events."""
    return _meta("Role", "rbac.authorization.k8s.io/v1", namespace, rules=[
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["list", "patch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ])


def role_binding(namespace: str) -> dict:
    return _meta("RoleBinding", "rbac.authorization.k8s.io/v1", namespace,
                 roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
                 subjects=[{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}])


@functools.cache
def _script(path: Path) -> str:
    """The controller's file, read once per process (the ConfigMap's data and name both come from it)."""
    return path.read_text()


def config_map_name() -> str:
    """Named after the file's content: a changed file is a new ConfigMap, which the Deployment then names (a
    rollout), and the old one is deleted. The Kubernetes provider replaces a ConfigMap whose data changed
    rather than update it (pulumi/pulumi-kubernetes#1567; `enableConfigMapMutable` is off), and a replacement
    under the same name would have to delete the old one first."""
    return f"{NAME}-{hashlib.sha256(_script(SCRIPT).encode()).hexdigest()[:10]}"


def config_map(namespace: str) -> dict:
    manifest = _meta("ConfigMap", "v1", namespace, data={SCRIPT_KEY: _script(SCRIPT)})
    manifest["metadata"]["name"] = config_map_name()
    return manifest


def _probe(which: str, period: int, failures: int) -> dict:
    return {"exec": {"command": ["python3", f"{MOUNT}/{SCRIPT_KEY}", "--probe", which]},
            "periodSeconds": period, "failureThreshold": failures, "timeoutSeconds": 5}


def deployment(namespace: str, system_pool: bool) -> dict:
    """One replica (Recreate: never two at once); a changed file is a ConfigMap of another name, which rolls it."""
    container = {
        "name": "ladder", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "args": [f"{MOUNT}/{SCRIPT_KEY}"],
        "env": [{"name": "LADDER_POLL_SECONDS", "value": str(POLL_SECONDS)},
                {"name": "LADDER_STATE_DIR", "value": STATE},
                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": {"requests": dict(RESOURCES), "limits": dict(RESOURCES)},
        "securityContext": {**container_security_context(), "readOnlyRootFilesystem": True},
        "volumeMounts": [{"name": "script", "mountPath": MOUNT, "readOnly": True},
                         {"name": "state", "mountPath": STATE}],
        # The file itself says whether its loop turns (restart it if not) and a pass succeeded lately.
        "livenessProbe": _probe("alive", period=30, failures=4),
        "readinessProbe": _probe("ready", period=10, failures=3),
    }
    spec: dict = {
        "serviceAccountName": NAME,
        "securityContext": {"runAsUser": NONROOT, "runAsGroup": NONROOT, "runAsNonRoot": True, **SECCOMP},
        "containers": [container],
        "volumes": [{"name": "script", "configMap": {"name": config_map_name()}},
                    {"name": "state", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}],
    }
    if system_pool:
        spec["nodeSelector"] = {NODEPOOL_LABEL: SYSTEM_POOL}
    return _meta("Deployment", "apps/v1", namespace, spec={
        "replicas": 1,
        "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": dict(COMPONENT)},
        "template": {"metadata": {"labels": dict(COMPONENT)}, "spec": spec},
    })


def ladder_manifests(runs: Sequence[SchedulingContract], namespace: str, system_pool: bool) -> dict[str, dict]:
    """The controller's objects where a run's contract (`run_contract`) has a ladder it can move along."""
    if not any(ladder_annotation(c) for c in runs):
        return {}
    objects = [
        _meta("ServiceAccount", "v1", namespace), role(namespace), role_binding(namespace),
        config_map(namespace), deployment(namespace, system_pool),
    ]
    return {manifest_key(m): m for m in objects}



def controller_manifests(config: StackConfig) -> dict[str, dict]:
    """The controller's objects of a stack (none on Autopilot, where a ComputeClass holds the ladder, or
    without a ladder run Kueue admits); on the platform's own Standard cluster it runs on the system pool."""
    if not config.kueue_flavors():
        return {}
    contracts = config.contracts()
    runs = [run_contract(run, contracts) for run in config.runs if contracts[run.pool].queue is not None]
    return ladder_manifests(runs, config.runs_namespace, system_pool=config.existing is None)
