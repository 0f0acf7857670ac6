"""A small client of the local kube-apiserver: server-side apply, get, list, delete, wait.

The program's Kubernetes provider applies objects server-side (pulumi-kubernetes
4.x enables server-side apply by default), so the harness does too: a PATCH
with `application/apply-patch+yaml` and a field manager
(https://kubernetes.io/docs/reference/using-api/server-side-apply/). Errors
carry the API server's own Status message: what a broken object fails with.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

FIELD_MANAGER = "gke-finetune-e2e"
T = TypeVar("T")


class ApiError(RuntimeError):
    def __init__(self, status: int, reason: str, message: str, method: str, path: str):
        self.status, self.reason, self.message = status, reason, message
        super().__init__(f"{method} {path}: {status} {reason}: {message}")


@dataclass(frozen=True)
class Resource:
    path: str  # /api/v1 or /apis/<group>/<version>
    plural: str
    namespaced: bool


class Kube:
    def __init__(self, server: str, token: str, ca_file: str, timeout: float = 30.0, impersonate: str = ""):
        self.server, self.token, self.timeout = server.rstrip("/"), token, timeout
        # Requests made as another user (the API server authorizes them as that user): the admin's right to
        # impersonate. https://kubernetes.io/docs/reference/access-authn-authz/authentication/#user-impersonation
        self.impersonate = impersonate
        self._ssl = ssl.create_default_context(cafile=ca_file)
        self._resources: dict[tuple[str, str], Resource] = {}

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                query: Mapping[str, str] | None = None) -> dict:
        url = self.server + path + (("?" + urllib.parse.urlencode(query)) if query else "")
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": content_type, "Accept": "application/json"}
        if self.impersonate:
            headers["Impersonate-User"] = self.impersonate
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                status = json.loads(raw)
            except ValueError:
                status = {"reason": err.reason, "message": raw.decode(errors="replace")}
            raise ApiError(err.code, status.get("reason", ""), status.get("message", ""), method, path) from None
        return json.loads(raw) if raw else {}

    def healthy(self, path: str = "/readyz") -> bool:
        """The apiserver answers `path` with 200 (its health endpoints take no JSON)."""
        req = urllib.request.Request(self.server + path, headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=5) as resp:
                return resp.status == 200
        except OSError:
            return False

    # --- discovery ---------------------------------------------------------------------------
    def resource(self, api_version: str, kind: str) -> Resource:
        key = (api_version, kind)
        if key not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            try:
                listing = self.request("GET", base)
            except ApiError as err:
                raise ApiError(err.status, err.reason, f"no API {api_version} on the server (kind {kind})",
                               "GET", base) from None
            for r in listing.get("resources", []):
                if "/" not in r["name"]:
                    self._resources[(api_version, r["kind"])] = Resource(base, r["name"], r["namespaced"])
            if key not in self._resources:
                raise ApiError(404, "NotFound", f"the server has no kind {kind} in {api_version}", "GET", base)
        return self._resources[key]

    def path(self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
        r = self.resource(api_version, kind)
        ns = f"/namespaces/{namespace}" if r.namespaced and namespace else ""
        return f"{r.path}{ns}/{r.plural}" + (f"/{name}" if name else "")

    def forget_discovery(self) -> None:
        """Discovery again on the next call (after CRDs were installed)."""
        self._resources.clear()

    # --- objects -----------------------------------------------------------------------------
    def apply(self, obj: Mapping) -> dict:
        meta = obj["metadata"]
        if "namespace" in meta and not self.resource(obj["apiVersion"], obj["kind"]).namespaced:
            # Helm fills in the release namespace only where the kind is namespaced.
            obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "namespace"}}
            meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        return self.request("PATCH", path, obj, "application/apply-patch+yaml",
                            {"fieldManager": FIELD_MANAGER, "force": "true"})

    def create(self, obj: Mapping) -> dict:
        meta = obj["metadata"]
        return self.request("POST", self.path(obj["apiVersion"], obj["kind"], meta.get("namespace")), obj)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        return self.request("GET", self.path(api_version, kind, namespace, name))

    def find(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        try:
            return self.get(api_version, kind, name, namespace)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             labels: str | None = None, fields: str | None = None) -> list[dict]:
        query = {k: v for k, v in (("labelSelector", labels), ("fieldSelector", fields)) if v}
        return self.request("GET", self.path(api_version, kind, namespace), query=query).get("items", [])

    def watch(self, api_version: str, kind: str, resource_version: str, seconds: int) -> Iterator[dict]:
        """The events ({type, object}) of `kind` in every namespace after `resource_version`, as they come,
        until the API server ends the watch after `seconds`
        (https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes)."""
        query = {"watch": "true", "resourceVersion": resource_version, "timeoutSeconds": str(seconds)}
        req = urllib.request.Request(self.server + self.path(api_version, kind) + "?" + urllib.parse.urlencode(query),
                                     headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json"})
        with urllib.request.urlopen(req, context=self._ssl, timeout=seconds + self.timeout) as resp:
            for line in resp:
                if line.strip():
                    yield json.loads(line)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
               propagation: str = "Background") -> None:
        try:
            self.request("DELETE", self.path(api_version, kind, namespace, name),
                         {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation})
        except ApiError as err:
            if err.status != 404:
                raise

    def patch_status(self, api_version: str, kind: str, name: str, namespace: str | None, status: dict) -> dict:
        path = self.path(api_version, kind, namespace, name) + "/status"
        return self.request("PATCH", path, {"status": status}, "application/merge-patch+json")

    def patch(self, api_version: str, kind: str, name: str, namespace: str | None, patch: dict) -> dict:
        return self.request("PATCH", self.path(api_version, kind, namespace, name), patch,
                            "application/merge-patch+json")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, interval: float = 0.5,
             explain: Callable[[], str] | None = None) -> T:
    """Poll `probe` until it returns something truthy; on timeout raise naming `what` (and `explain()`)."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = probe()
            if value:
                return value
        except (ApiError, OSError) as err:
            last_error = err
        time.sleep(interval)
    detail = explain() if explain else (str(last_error) if last_error else "")
    raise TimeoutError(f"e2e: timed out after {timeout:.0f}s waiting for {what}" + (f": {detail}" if detail else ""))
