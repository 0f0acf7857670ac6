"""Applying objects as the program's provider would: server-side, CRDs established before their objects."""

from __future__ import annotations

from collections.abc import Iterable

from e2e.harness.kube import ApiError, Kube, wait_for

CRD_TIMEOUT = 60.0


def _established(kube: Kube, name: str) -> bool:
    crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    return any(c["type"] == "Established" and c["status"] == "True"
               for c in crd.get("status", {}).get("conditions") or [])


def apply_all(kube: Kube, objects: Iterable[dict]) -> list[dict]:
    """Apply in order; CRDs first, each Established before anything else is applied."""
    objects = list(objects)
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    applied = [kube.apply(crd) for crd in crds]
    for crd in crds:
        name = crd["metadata"]["name"]
        wait_for(f"CRD {name} Established", lambda n=name: _established(kube, n), CRD_TIMEOUT)
    if crds:
        kube.forget_discovery()
    for obj in objects:
        if obj["kind"] != "CustomResourceDefinition":
            applied.append(apply_one(kube, obj))
    return applied


def apply_one(kube: Kube, obj: dict) -> dict:
    """Server-side apply one object; the API server's refusal is raised as it says it."""
    try:
        return kube.apply(obj)
    except ApiError as err:
        if err.status == 404:  # server-side apply creates: a 404 is a kind discovery hadn't seen yet
            kube.forget_discovery()
            return kube.apply(obj)
        raise
