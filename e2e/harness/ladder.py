"""The ladder controller (controllers/ladder.py) as a process of this machine, as its pod would run it.

kwok runs no containers, so the Deployment the stack declares (manifests/ladder.py) is scheduled and marked
running but runs nothing. Here the same file runs under this machine's Python with what its pod would have:
the API server's address, and in a service-account directory the CA, a token of the stack's own
`gke-finetune-ladder` ServiceAccount (a TokenRequest, so the Role the stack declares is all it may do) and
the namespace.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from urllib.parse import urlparse

from e2e.harness.cluster import ControlPlane
from e2e.harness.kube import Kube
from e2e.harness.tools import ROOT
from manifests.ladder import NAME

TOKEN_SECONDS = 3600
POLL_SECONDS = "0.5"


@contextlib.contextmanager
def ladder_controller(cp: ControlPlane, kube: Kube, namespace: str) -> Iterator[str]:
    """The controller running while the block runs; yields its process's name (its log: cp.supervisor)."""
    account = cp.state / "ladder-account"
    account.mkdir(exist_ok=True)
    token = kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{NAME}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS}})["status"]["token"]
    (account / "token").write_text(token)
    (account / "ca.crt").write_bytes(cp.pki.ca_cert.read_bytes())
    (account / "namespace").write_text(namespace)
    server = urlparse(cp.server)
    cp.supervisor.start(NAME, [sys.executable, str(ROOT / "controllers" / "ladder.py")], env={
        "SERVICE_ACCOUNT_DIR": str(account), "KUBERNETES_SERVICE_HOST": server.hostname or "",
        "KUBERNETES_SERVICE_PORT": str(server.port), "LADDER_POLL_SECONDS": POLL_SECONDS,
        "LADDER_STATE_DIR": str(account)})
    try:
        yield NAME
    finally:
        cp.supervisor.kill(NAME)
