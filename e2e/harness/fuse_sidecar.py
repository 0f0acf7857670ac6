"""GKE's Cloud Storage FUSE sidecar injection, as a webhook of this control plane.

On GKE a mutating webhook of the GCS FUSE CSI driver adds a sidecar to every
pod created with `gke-gcsfuse/volumes: "true"`, so the scheduler places the
pod with the sidecar's requests in it. Without it here, the scheduler would
judge a smaller pod than GKE's. This plays that webhook, as the driver's
source does it (GoogleCloudPlatform/gcs-fuse-csi-driver, pkg/webhook:
mutatingwebhook.go `Handle`, config.go `populateResource`, sidecar_spec.go,
injection.go; its defaults are the webhook Deployment's arguments,
deploy/base/webhook/deployment.yaml: requests 250m / 256Mi / 5Gi, limits 0
meaning none; its registration deploy/base/webhook/mutatingwebhook.yaml):

- the sidecar `gke-gcsfuse-sidecar` is a native sidecar (an init container
  with `restartPolicy: Always`, the driver's choice on Kubernetes 1.29+), put
  first among the init containers, with the Restricted securityContext the
  driver gives it;
- each resource's request and limit from the `gke-gcsfuse/<r>-request|limit`
  annotations: both unset, the defaults; one set, the other equals it; a
  limit of 0 is no limit;
- the `gke-gcsfuse-tmp`, `-buffer` and `-cache` emptyDirs, except those the
  pod declares itself (the stacks' in-memory cache is one);
- a pod that already has the sidecar is left alone.

The driver's metadata-prefetch sidecar is added only for volumes with
`gcsfuseMetadataPrefetchOnMount: "true"`, which no stack declares; it is
refused here rather than modelled (`inject` raises).

    python -m e2e.harness.fuse_sidecar STATE_DIR   (serves STATE_DIR/fuse-sidecar.json's port)
"""

from __future__ import annotations

import base64
import copy
import json
import socket
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from core import quantity
from e2e.harness.cluster import LOCALHOST, ControlPlane, free_port
from e2e.harness.kube import Kube, wait_for

ANNOTATION = "gke-gcsfuse/volumes"
SIDECAR = "gke-gcsfuse-sidecar"
CSI_DRIVER = "gcsfuse.csi.storage.gke.io"
DEFAULT_REQUESTS = {"cpu": "250m", "memory": "256Mi", "ephemeral-storage": "5Gi"}
DEFAULT_LIMITS = {"cpu": "0", "memory": "0", "ephemeral-storage": "0"}
NOBODY = 65534
VOLUMES = {"gke-gcsfuse-tmp": "/gcsfuse-tmp", "gke-gcsfuse-buffer": "/gcsfuse-buffer",
           "gke-gcsfuse-cache": "/gcsfuse-cache"}
PATH = "/inject"
SETTINGS = "fuse-sidecar.json"


def _is_zero(value: str) -> bool:
    return float(quantity.parse(value)) == 0


def sidecar_resources(annotations: dict[str, str]) -> dict[str, dict[str, str]]:
    """The sidecar's requests and limits, as config.go's populateResource and prepareResourceList decide."""
    requests, limits = {}, {}
    for resource in DEFAULT_REQUESTS:
        request = annotations.get(f"gke-gcsfuse/{resource}-request")
        limit = annotations.get(f"gke-gcsfuse/{resource}-limit")
        if request is None and limit is None:
            request, limit = DEFAULT_REQUESTS[resource], DEFAULT_LIMITS[resource]
        if request is None and _is_zero(limit):
            request = DEFAULT_REQUESTS[resource]
        request = limit if request is None else request
        limit = request if limit is None else limit
        if not _is_zero(request):  # a zero quantity is left out of the list
            requests[resource] = request
        if not _is_zero(limit):
            limits[resource] = limit
    return {"requests": requests, "limits": limits}


def sidecar_container(annotations: dict[str, str]) -> dict:
    return {
        "name": SIDECAR, "image": "gke.gcr.io/gcs-fuse-csi-driver-sidecar-mounter", "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always", "args": ["--v=5"], "env": [{"name": "NATIVE_SIDECAR", "value": "TRUE"}],
        "securityContext": {
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True,
            "runAsUser": NOBODY, "runAsGroup": NOBODY,
        },
        "resources": sidecar_resources(annotations),
        "volumeMounts": [{"name": name, "mountPath": path} for name, path in VOLUMES.items()],
    }


def inject(pod: dict) -> dict | None:
    """The pod as GKE's webhook leaves it, or None when it doesn't change it."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ANNOTATION) not in ("true", "True"):
        return None
    spec = pod["spec"]
    if any(c["name"] == SIDECAR for c in spec.get("initContainers", []) + spec.get("containers", [])):
        return None
    for volume in spec.get("volumes") or []:
        if (volume.get("csi") or {}).get("driver") == CSI_DRIVER and \
                (volume["csi"].get("volumeAttributes") or {}).get("gcsfuseMetadataPrefetchOnMount") == "true":
            raise ValueError(f"volume {volume['name']}: metadata prefetch sidecar is not played by this harness")
    out = copy.deepcopy(pod)
    out["spec"]["initContainers"] = [sidecar_container(annotations)] + spec.get("initContainers", [])
    declared = {v["name"] for v in spec.get("volumes") or []}
    # The tmp volume always; buffer and cache unless the pod has its own (sidecar_spec.go).
    added = [{"name": n, "emptyDir": {}} for n in VOLUMES if n == "gke-gcsfuse-tmp" or n not in declared]
    out["spec"]["volumes"] = added + (spec.get("volumes") or [])
    return out


def review_response(review: dict) -> dict:
    request = review["request"]
    response: dict = {"uid": request["uid"], "allowed": True}
    if request.get("operation") == "CREATE":
        try:
            mutated = inject(request["object"])
        except ValueError as err:
            response.update(allowed=False, status={"code": 400, "message": str(err)})
            mutated = None
        if mutated is not None:
            patch = [{"op": "add", "path": "/spec/initContainers", "value": mutated["spec"]["initContainers"]},
                     {"op": "add", "path": "/spec/volumes", "value": mutated["spec"]["volumes"]}]
            response.update(patchType="JSONPatch", patch=base64.b64encode(json.dumps(patch).encode()).decode())
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def webhook_configuration(port: int, ca_bundle: bytes) -> dict:
    """The driver's registration, its Service replaced by a url (e2e/README.md, "Webhooks")."""
    name = "gcsfuse-sidecar-injector.csi.storage.gke.io"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": name, "matchPolicy": "Equivalent",
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"], "scope": "Namespaced"}],
            "clientConfig": {"url": f"https://{LOCALHOST}:{port}{PATH}",
                             "caBundle": base64.b64encode(ca_bundle).decode()},
            # The driver's is Ignore; Fail here, so a harness fault can't pass pods on without their sidecar.
            "failurePolicy": "Fail", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "reinvocationPolicy": "Never", "timeoutSeconds": 5,
        }],
    }


def start(cp: ControlPlane, kube: Kube) -> None:
    """Serve the injection on a free port of 127.0.0.1 and register it, before any pod is created."""
    port = free_port()
    cert, key = cp.pki.serving_pair("fuse-sidecar")
    (cp.state / SETTINGS).write_text(json.dumps({"port": port, "cert": str(cert), "key": str(key)}))
    cp.supervisor.start("fuse-sidecar", [sys.executable, "-m", "e2e.harness.fuse_sidecar", str(cp.state)],
                        cwd=Path(__file__).resolve().parents[2])
    context = ssl.create_default_context(cafile=str(cp.pki.ca_cert))

    def serving() -> bool:
        try:
            with socket.create_connection((LOCALHOST, port), timeout=2) as raw, \
                    context.wrap_socket(raw, server_hostname=LOCALHOST):
                return True
        except OSError:
            return False

    wait_for("the FUSE sidecar webhook", serving, 30.0, explain=lambda: cp.supervisor.log_tail("fuse-sidecar"))
    kube.apply(webhook_configuration(port, cp.pki.ca_cert.read_bytes()))


class _Handler(BaseHTTPRequestHandler):
    # Keep-alive: the API server reuses its connection to a webhook (HTTP/1.1), where HTTP/1.0, the
    # handler's default, made it open a connection and a TLS session per pod created; at thousands of pods
    # on 2 cores that was the control plane's slowest step (bench/scale.py, docs/benchmarks.md).
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.split("?")[0] != PATH:
            self.send_error(404)
            return
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(review_response(review)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt: str, *args) -> None:
        """Errors only (log_error): a line per request was a write per pod created."""

    def log_error(self, fmt: str, *args) -> None:
        sys.stderr.write("fuse-sidecar: " + fmt % args + "\n")


def serve(state: Path) -> None:
    settings = json.loads((state / SETTINGS).read_text())
    server = ThreadingHTTPServer((LOCALHOST, settings["port"]), _Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(settings["cert"], settings["key"])
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
