"""GKE's side of queued provisioning, for the queued pools of a stack: nodes for each ProvisioningRequest.

Nothing provisions here, so this plays the part GKE's cluster autoscaler
plays for `queued-provisioning.gke.io` requests
(https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest):
for a ProvisioningRequest whose pod template (the PodTemplate Kueue creates
with the flavor's node labels) selects a queued pool's nodes, it creates
one slice of that pool's nodes, labelled
`autoscaling.gke.io/provisioning-request: <name>`, and sets the request's
`Provisioned` condition with `provisioningClassDetails.ResizeRequestName`
(what the stacks' ProvisioningRequestConfig copies into the pods' selector).

`<state>/provisioner-mode` holds `provision` (the default) or `hold`: held,
requests are left as they are, for a test to set their status itself (a
failed request: Failed=True).

It acts on the API server's watch of ProvisioningRequests: a request Kueue
creates is provisioned as soon as the event arrives, as GKE's autoscaler
reacts to it, not at the next turn of a polling loop. The watch is renewed
every WATCH_SECONDS, when the mode file is read again.

    python -m e2e.harness.provisioner STATE_DIR
"""

from __future__ import annotations

import copy
import http.client
import json
import sys
import time
import zlib
from datetime import datetime, timezone
from pathlib import Path

from core.catalog import PROVISIONING_REQUEST_LABEL
from e2e.harness.kube import ApiError, Kube

PR_API = "autoscaling.x-k8s.io/v1"
RESIZE_DETAIL = "ResizeRequestName"
WATCH_SECONDS = 1  # how soon a mode written to the file counts when no request changes
RETRY_SECONDS = 1.0  # after an error (the API server away: the faults tests kill it)


def _conditions(pr: dict) -> dict[str, str]:
    return {c["type"]: c["status"] for c in pr.get("status", {}).get("conditions") or []}


def _selector(kube: Kube, pr: dict) -> dict[str, str]:
    selector: dict[str, str] = {}
    for pod_set in pr["spec"].get("podSets", []):
        template = kube.get("v1", "PodTemplate", pod_set["podTemplateRef"]["name"], pr["metadata"]["namespace"])
        selector.update(template["template"]["spec"].get("nodeSelector") or {})
    return selector


def matching_pool(pools: list[dict], selector: dict[str, str]) -> dict | None:
    """The queued pool whose nodes carry every label of `selector`."""
    for pool in pools:
        labels = pool["nodes"][0]["metadata"]["labels"]
        if all(labels.get(k) == v for k, v in selector.items() if k != PROVISIONING_REQUEST_LABEL):
            return pool
    return None


def resize_request_name(pr_name: str) -> str:
    """The name GKE gives the request's resize request, which nodes carry as a label and the pods select
    (`ResizeRequestName`, copied into a node selector by the stacks' ProvisioningRequestConfig): a label
    value, at most 63 characters, while Kueue names a ProvisioningRequest `<workload>-<check>-<attempt>`
    up to an object name's length (kueue v0.19.2 pkg/controller/admissionchecks/provisioning,
    ProvisioningRequestName). A longer name is cut and given a hash of the whole, as a Compute Engine
    resource name is bounded."""
    if len(pr_name) <= 63:
        return pr_name
    return f"{pr_name[:54].rstrip('-')}-{zlib.crc32(pr_name.encode()):08x}"


def provision(kube: Kube, pr: dict, pool: dict) -> list[str]:
    name = pr["metadata"]["name"]
    resize = resize_request_name(name)
    created = []
    for index, template in enumerate(pool["nodes"]):
        node = copy.deepcopy(template)
        node_name = f"{template['metadata']['name'][:40]}-{zlib.crc32(name.encode()):08x}-{index}"
        node["metadata"]["name"] = node_name
        node["metadata"]["labels"].update({PROVISIONING_REQUEST_LABEL: resize, "kubernetes.io/hostname": node_name})
        if kube.find("v1", "Node", node_name) is None:
            kube.create(node)
        created.append(node_name)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "conditions": [
            {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now,
             "observedGeneration": pr["metadata"].get("generation", 1)}
            for t, r, m in (("Accepted", "Accepted", "request accepted"),
                            ("Provisioned", "Provisioned", f"nodes {', '.join(created)} provisioned"))
        ],
        "provisioningClassDetails": {RESIZE_DETAIL: resize},
    }
    kube.patch_status(PR_API, "ProvisioningRequest", name, pr["metadata"]["namespace"], status)
    return created


def step(kube: Kube, pools: list[dict], mode: str, requests: list[dict]) -> None:
    if mode != "provision":
        return
    for pr in requests:
        conditions = _conditions(pr)
        if conditions.get("Provisioned") == "True" or conditions.get("Failed") == "True":
            continue
        pool = matching_pool(pools, _selector(kube, pr))
        if pool is not None:
            created = provision(kube, pr, pool)
            print(f"provisioner: {pr['metadata']['name']} -> {created}", flush=True)


def main(argv: list[str]) -> int:
    state = Path(argv[0])
    settings = json.loads((state / "provisioner.json").read_text())
    kube = Kube(settings["server"], settings["token"], settings["ca"])
    mode_file = state / "provisioner-mode"
    while True:
        try:
            listed = kube.request("GET", kube.path(PR_API, "ProvisioningRequest"))
            # Read after the list: a test writes the mode before it submits the run whose request is listed.
            mode = mode_file.read_text().strip() if mode_file.exists() else "provision"
            step(kube, settings["pools"], mode, listed.get("items", []))
            # Until a request changes (then list again), or the watch ends (then read the mode again).
            events = kube.watch(PR_API, "ProvisioningRequest", listed["metadata"]["resourceVersion"], WATCH_SECONDS)
            next(events, None)
            events.close()
        except (ApiError, OSError, ValueError, http.client.HTTPException) as err:
            print(f"provisioner: {err}", flush=True)
            time.sleep(RETRY_SECONDS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
