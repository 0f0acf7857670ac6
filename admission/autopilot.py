"""What GKE Autopilot refuses to admit, or would quietly change, in a pod."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from admission.findings import Finding
from core import quantity
from core.catalog import Accelerator

HOST_NAMESPACES_SOURCE = "https://cloud.google.com/kubernetes-engine/docs/concepts/autopilot-security#built-in-security"
FUSE_SOURCE = "https://github.com/GoogleCloudPlatform/gcs-fuse-csi-driver/blob/main/docs/troubleshooting.md"
REQUESTS_SOURCE = "https://cloud.google.com/kubernetes-engine/docs/concepts/autopilot-resource-requests"


def autopilot_findings(pod: Mapping, accelerator: Accelerator, where: str) -> Iterator[Finding]:
    spec = pod.get("spec") or {}
    # GKE Warden's autogke-disallow-hostnamespaces policy rejects it.
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            yield Finding("autopilot", f"{where}.spec.{field}", True,
                          "is refused by Autopilot (no host namespaces)", HOST_NAMESPACES_SOURCE)
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    for key, value in annotations.items():
        if key.startswith("gke-gcsfuse/") and key.endswith(("-limit", "-request")) and str(value) == "0":
            yield Finding("autopilot", f"{where}.metadata.annotations[{key}]", value,
                          "can't lift a FUSE sidecar limit on Autopilot", FUSE_SOURCE)
    caps = dict(accelerator.autopilot_request_caps)
    for i, container in enumerate(spec.get("containers") or []):
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        for resource in ("cpu", "memory"):
            if resource not in requests:
                yield Finding("autopilot", f"{where}.spec.containers[{i}].resources.requests.{resource}", None,
                              "is unset: Autopilot would give the container its small default", REQUESTS_SOURCE)
        for resource, cap in caps.items():
            if resource in requests and quantity.parse(requests[resource]) > quantity.parse(cap):
                yield Finding("autopilot", f"{where}.spec.containers[{i}].resources.requests.{resource}",
                              requests[resource], f"is above the {cap} known to be admitted for {accelerator.name}",
                              REQUESTS_SOURCE)
