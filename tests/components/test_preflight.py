"""The reads of an existing cluster before a stack declares anything there (components/preflight.py)."""

from __future__ import annotations

import base64
import gzip
import json
from types import SimpleNamespace

from admission.shared_cluster import owner_values
from components import preflight


def helm_release_secret(values: dict) -> SimpleNamespace:
    """A release as Helm 3 stores it: JSON, gzipped, base64 (pkg/storage/driver/util.go `encodeRelease`),
    in a Secret's `release` key (which the API serves base64-encoded once more)."""
    encoded = base64.b64encode(gzip.compress(json.dumps({"name": "jobset", "config": values}).encode()))
    return SimpleNamespace(data={"release": base64.b64encode(encoded).decode()})


def test_the_owner_is_read_from_the_releases_user_supplied_values(monkeypatch):
    asked = {}

    class CoreV1:
        def __init__(self, api):
            pass

        def list_namespaced_secret(self, namespace, label_selector, _request_timeout):
            asked.update(namespace=namespace, selector=label_selector)
            return SimpleNamespace(items=[helm_release_secret({"image": {"tag": "x"}, **owner_values("team-a", "a")})])

    monkeypatch.setattr(preflight.k8s_client, "CoreV1Api", CoreV1)
    assert preflight._release_owner(object(), ("jobset-system", "jobset")) == {"namespace": "team-a", "stack": "a"}
    assert asked == {"namespace": "jobset-system", "selector": "owner=helm,name=jobset,status=deployed"}
