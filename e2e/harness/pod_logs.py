"""Container logs for the kwok pods, served the way a kubelet serves them, read through the API server.

kwok runs no container, so its pods have no log of their own; kwok serves one from a file a `Logs`
object names (`kwok.x-k8s.io/v1alpha1`, one per pod: the file of each container, `follow`), on the
kubelet API it serves at the nodes' address (sigs.k8s.io/kwok v0.8.0 pkg/kwok/server/debugging_logs.go:
`GET /containerLogs/<namespace>/<pod>/<container>` read with the CRI log reader, following the file
as a kubelet follows a running container's). The API server proxies `pods/<pod>/log` to the node's
kubelet endpoint, `status.daemonEndpoints.kubeletEndpoint.Port` at the node's address of the first
type `--kubelet-preferred-address-types` lists (kube-apiserver's `pkg/kubelet/client`): here
InternalIP, 127.0.0.1, and kwok's `--node-port`, the port its server listens on. So `make logs`
reads a log through the very request it makes against GKE.

kwok watches `Logs` objects when started with `--enable-crds=Logs` and needs their API served first;
the definition below is the harness's own, the object's fields as kwok v0.8.0's
pkg/apis/v1alpha1/logs_types.go declares them (`spec.logs[]`: containers, logsFile,
previousLogsFile, follow), their schema left open.

The files are in the CRI log format the kubelet's log reader parses, one line each:
`<RFC 3339 time> stdout F <text>` (k8s.io/cri-client pkg/logs/logs.go, parseCRILog).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from pathlib import Path

from e2e.harness.kube import Kube, wait_for

LOGS_API = "kwok.x-k8s.io/v1alpha1"
LOGS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "logs.kwok.x-k8s.io"},
    "spec": {
        "group": "kwok.x-k8s.io", "scope": "Namespaced",
        "names": {"kind": "Logs", "listKind": "LogsList", "plural": "logs", "singular": "logs"},
        "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}
TIMEOUT = 60.0


def install_logs_api(kube: Kube) -> None:
    """The Logs API, served before kwok starts watching it."""
    kube.apply(LOGS_CRD)
    wait_for("the Logs CRD established", lambda: any(
        c["type"] == "Established" and c["status"] == "True"
        for c in kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", LOGS_CRD["metadata"]["name"])
        .get("status", {}).get("conditions", [])), TIMEOUT)
    kube.forget_discovery()


def write_lines(path: Path, lines: Iterable[str], stream: str = "stdout") -> None:
    """Append lines to a container log file, as the container runtime writes them."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with path.open("a") as out:
        out.writelines(f"{now} {stream} F {line}\n" for line in lines)


def serve_log(kube: Kube, namespace: str, pod: str, path: Path, containers: Iterable[str] = ("trainer",)) -> None:
    """kwok serves `path` as the log of the pod's containers (created empty if missing)."""
    path.touch()
    kube.apply({"apiVersion": LOGS_API, "kind": "Logs", "metadata": {"name": pod, "namespace": namespace},
                "spec": {"logs": [{"containers": list(containers), "logsFile": str(path), "follow": True}]}})


def read_log(kube: Kube, namespace: str, pod: str, container: str = "trainer") -> str:
    """The pod's log through the API server (raises ApiError while kwok does not serve it yet)."""
    import urllib.request  # pylint: disable=import-outside-toplevel

    req = urllib.request.Request(f"{kube.server}/api/v1/namespaces/{namespace}/pods/{pod}/log?container={container}",
                                 headers={"Authorization": f"Bearer {kube.token}"})
    with urllib.request.urlopen(req, context=kube._ssl, timeout=kube.timeout) as resp:  # noqa: SLF001
        return resp.read().decode()


def wait_served(kube: Kube, namespace: str, pod: str, expected: str) -> str:
    """Until the API server returns the pod's log with `expected` in it (kwok's watch has seen the Logs)."""
    def probe() -> str | None:
        try:
            text = read_log(kube, namespace, pod)
        except OSError:
            return None
        return text if expected in text else None

    return wait_for(f"pod {namespace}/{pod}'s log served", probe, TIMEOUT)
