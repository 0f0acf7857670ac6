"""The ladder controller's objects and the ladder a run carries (manifests/ladder.py), from the shipped stacks."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from admission.pod_security import RESTRICTED, evaluate
from controllers import ladder as ctl
from controllers.ladder import LADDER
from core.names import POOL_LABEL, SYSTEM_POOL
from manifests import ladder
from stack import reader
from stack.queueing import run_contract
from tools import render

QUEUED = "tpu-queued"


def _config():
    return reader.load_files(QUEUED, render.ROOT)


def test_each_ladder_run_carries_its_rungs_in_order_and_the_label_that_tells_them_apart():
    config = _config()
    jobsets = render.run_manifests(config)
    for run in config.runs:
        annotation = jobsets[run.name]["metadata"].get("annotations", {}).get(LADDER)
        if not run.ladder:
            assert annotation is None, run.name
            continue
        assert json.loads(annotation) == {"label": POOL_LABEL, "rungs": [run.pool, *run.ladder]}, run.name


def test_a_rung_no_single_value_selects_gives_no_ladder_to_move_along():
    """An existing cluster's multislice pool: one node pool per slice, none of which alone is the rung."""
    config = _config()
    contracts = dict(config.contracts())
    run = next(r for r in config.runs if r.ladder)
    rung = run.ladder[0]
    contracts[rung] = dataclasses.replace(contracts[rung], pool_values=("pool-a", "pool-b"))
    contract = run_contract(run, contracts)
    assert contract.rung_pins == () and ladder.ladder_annotation(contract) == {}
    assert ladder.ladder_manifests([contract], "ns", system_pool=False) == {}


def test_only_a_stack_with_a_queued_ladder_runs_the_controller():
    with_controller = {s for s in render.shipped_stacks() if render.stack_ladder_manifests(s)}
    assert with_controller == {QUEUED}  # autopilot's ladders are ComputeClasses; no other stack has a ladder


def _objects() -> dict[str, dict]:
    return render.stack_ladder_manifests(QUEUED)


def test_the_controller_pod_meets_the_restricted_profile_with_limits_equal_to_requests():
    deployment = _objects()["deployment-gke-finetune-ladder"]
    pod = deployment["spec"]["template"]
    assert evaluate(pod, RESTRICTED) == []
    (container,) = pod["spec"]["containers"]
    assert container["resources"]["limits"] == container["resources"]["requests"]
    assert re.fullmatch(r"[^@:]+(:[\w.-]+)?@sha256:[0-9a-f]{64}", container["image"]), container["image"]
    assert pod["spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": SYSTEM_POOL}
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # never two at once


def test_the_configmap_holds_the_controller_file_and_a_change_is_a_new_name_the_pod_names(tmp_path, monkeypatch):
    objects = _objects()
    script = (render.ROOT / "controllers" / "ladder.py").read_text()
    [config_map] = [m for m in objects.values() if m["kind"] == "ConfigMap"]
    assert config_map["data"] == {"ladder.py": script}
    volumes = objects["deployment-gke-finetune-ladder"]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "script", "configMap": {"name": config_map["metadata"]["name"]}} in volumes
    changed = tmp_path / "ladder.py"
    changed.write_text(script + "\n# changed\n")
    monkeypatch.setattr(ladder, "SCRIPT", changed)
    assert ladder.config_map_name() != config_map["metadata"]["name"]
    assert ladder.config_map_name().startswith(ladder.NAME)


# The collections controllers/ladder.py calls, as the (group, resource) a Role grants, and the verb of each method.
PATHS = {ctl.JOBSETS: ("jobset.x-k8s.io", "jobsets"), ctl.WORKLOADS: ("kueue.x-k8s.io", "workloads"),
         ctl.EVENTS: ("", "events")}
VERBS = {"GET": "list", "PATCH": "patch", "POST": "create", "DELETE": "delete"}


class RecordingApi:
    """The namespace as the API server lists it; every request the controller makes, recorded."""

    namespace = "finetune"

    def __init__(self, jobsets: list[dict], workloads: list[dict]):
        self.lists = {ctl.JOBSETS: {"items": jobsets}, ctl.WORKLOADS: {"items": workloads}}
        self.calls: list[tuple[str, str]] = []

    def call(self, method: str, path: str, body=None, content_type: str = "") -> dict:
        collection = next(c for c in PATHS if path == c or path.startswith(c + "/"))
        self.calls.append((method, collection))
        return self.lists.get(path, {}) if method == "GET" else {}


def _ladder_jobset(suspend: bool, selector: dict) -> dict:
    pod = {"spec": {"template": {"spec": {"nodeSelector": selector}}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "run", "uid": "u", "annotations": {
                LADDER: json.dumps({"label": POOL_LABEL, "rungs": ["a", "b"]})}},
            "spec": {"suspend": suspend, "replicatedJobs": [{"name": "slice", "template": pod}]}}


def test_the_role_grants_exactly_the_requests_the_controller_makes():
    evicted = {"metadata": {"name": "w", "ownerReferences": [{"uid": "u"}]},
               "status": {"conditions": [{"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout"}]}}
    api = RecordingApi([_ladder_jobset(True, {}), {**_ladder_jobset(False, {POOL_LABEL: "a"}),
                                                   "metadata": {"name": "admitted", "uid": "v", "annotations": {
                                                       LADDER: json.dumps({"label": POOL_LABEL, "rungs": ["a", "b"]})}}}],
                       [evicted])
    assert ctl.sync(api) == 2  # the move, and the record of the admitted run's rung
    wanted: dict[tuple[str, str], set[str]] = {}
    for method, collection in api.calls:
        wanted.setdefault(PATHS[collection], set()).add(VERBS[method])
    role = _objects()["role-gke-finetune-ladder"]
    granted = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"]}
    assert granted == wanted


@pytest.mark.parametrize("kind", ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment"])
def test_every_object_is_in_the_stack_namespace(kind):
    (manifest,) = [m for m in _objects().values() if m["kind"] == kind]
    assert manifest["metadata"]["namespace"] == _config().runs_namespace


@pytest.mark.parametrize("stack", render.shipped_stacks())
def test_no_pod_but_the_controller_mounts_a_service_account_token(stack):
    """The reason tools/scan_skips.yaml gives for skipping checkov's CKV_K8S_38 everywhere."""
    objects = {**render.stack_manifests(stack), **render.staging_manifests(stack),
               **render.stack_serve_manifests(stack)}
    specs = [rj["template"]["spec"]["template"]["spec"] for m in objects.values() if m["kind"] == "JobSet"
             for rj in m["spec"]["replicatedJobs"]]
    specs += [m["spec"]["template"]["spec"] for m in objects.values() if m["kind"] in ("Job", "Deployment")]
    assert specs, stack
    assert all(spec.get("automountServiceAccountToken") is False for spec in specs), stack
