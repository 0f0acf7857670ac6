"""`serve:` through the real Pulumi CLI against the control plane: the model server's objects declared,
admitted and scheduled.

The platform team's part is the harness's (the dev stack's TPU nodes, two of them, and the controllers).
The stack is the dev stack for an existing cluster, its run exporting and a vLLM server of that export
declared: `pulumi up` creates the server's account, PriorityClass, Deployment and Service beside the run;
the apiserver admits them (the namespace's Pod Security level is the one the stack derives with the
server's pods counted); the Deployment's pod is bound by the real scheduler to a node of the served pool,
beside the run's; `destroy` removes them.
"""

from __future__ import annotations

import json

import pytest
import yaml

from core.names import SERVE_LABEL, server_name, server_service_account
from e2e.harness.engine import FAKE_DIGEST, engine, existing_cluster_config
from e2e.harness.install import install_stack
from e2e.harness.kube import wait_for
from e2e.harness.session import control_plane
from e2e.harness.stack_objects import stack_objects
from e2e.harness.tools import ROOT
from e2e.tests.reports import Report
from e2e.tests.settings import LIFETIME
from manifests.serving import priority_class_name

BASE = "dev"
STACK = "serve-dev"
TIMEOUT = 180.0
SERVE_REPORT = Report("engine")


def _two_nodes(pool: dict) -> dict:
    """The dev pool with a node for the run and one for the server."""
    return {**pool, "autoscaling": {"minNodes": 2, "maxNodes": 2}}


@pytest.fixture(scope="module")
def served(state_root):
    config = yaml.safe_load((ROOT / f"Pulumi.{BASE}.yaml").read_text())["config"]
    [pool] = config["gke-finetune:pools"]
    objects = stack_objects(BASE, overrides_json=json.dumps({"gke-finetune:pools": [_two_nodes(pool)]}))
    with control_plane(state_root / "serve", LIFETIME) as cp:
        kube = cp.client()
        install_stack(cp, kube, objects, platform_only=True)
        made = engine(cp.tools, state_root / "serve" / "pulumi", STACK, cp.kubeconfig)
        stack = existing_cluster_config(BASE, str(cp.kubeconfig))
        stack["gke-finetune:pools"] = [_two_nodes(p) for p in stack["gke-finetune:pools"]]
        [run] = stack["gke-finetune:runs"]
        run["export"] = {"format": "huggingface"}
        stack["gke-finetune:serve"] = {"run": run["name"], "pool": pool["name"],
                                       "image": f"vllm/vllm-tpu@{FAKE_DIGEST}", "maxModelLen": 2048}
        made.write_stack(stack)
        yield kube, made, run["name"], stack["gke-finetune:namespace"]


def test_up_declares_the_server_and_the_scheduler_binds_it_beside_the_run(served):
    kube, made, run, namespace = served
    made.run("up", "--yes")
    name = server_name(run)
    deployment = kube.get("apps/v1", "Deployment", name, namespace)
    service = kube.get("v1", "Service", name, namespace)
    assert service["spec"]["selector"] == {SERVE_LABEL: run} and service["spec"]["ports"][0]["port"] == 8000
    assert kube.get("v1", "ServiceAccount", server_service_account(STACK), namespace)
    assert kube.get("scheduling.k8s.io/v1", "PriorityClass", priority_class_name(namespace))["value"] < 0
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == server_service_account(STACK)

    def bound():
        pods = kube.list("v1", "Pod", namespace, labels=f"{SERVE_LABEL}={run}")
        return pods if pods and all(p["spec"].get("nodeName") for p in pods) else None

    def explain() -> str:
        return "; ".join(f"{p['metadata']['name']}: {p.get('status', {}).get('conditions')}"
                         for p in kube.list("v1", "Pod", namespace, labels=f"{SERVE_LABEL}={run}")) or "no pod"

    [pod] = wait_for(f"the server of {run} bound", bound, TIMEOUT, explain=explain)
    node = kube.get("v1", "Node", pod["spec"]["nodeName"])
    selector = deployment["spec"]["template"]["spec"]["nodeSelector"]
    assert selector.items() <= node["metadata"]["labels"].items()
    assert pod["spec"]["priority"] < 0
    SERVE_REPORT.append(f"== serve: Deployment and Service {namespace}/{name} created by pulumi up; its pod bound to "
                        f"{node['metadata']['name']} ({selector})")


def test_destroy_removes_the_server(served):
    kube, made, run, namespace = served
    made.run("destroy", "--yes")
    name = server_name(run)
    wait_for("the server's objects gone", lambda: not kube.find("apps/v1", "Deployment", name, namespace)
             and not kube.find("v1", "Service", name, namespace), TIMEOUT)
