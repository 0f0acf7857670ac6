"""The harness's FUSE sidecar injection decides resources and volumes as the driver's webhook does."""

from __future__ import annotations

from e2e.harness.fuse_sidecar import SIDECAR, inject, review_response, sidecar_resources
from e2e.harness.tools import ROOT
from manifests.storage import sidecar_annotations
from stack import reader


def _pod(annotations: dict[str, str], volumes: list[dict] | None = None) -> dict:
    return {"metadata": {"annotations": annotations},
            "spec": {"containers": [{"name": "trainer"}], "volumes": volumes or []}}


def test_without_annotations_the_driver_defaults_apply_and_no_limit():
    assert sidecar_resources({}) == {"requests": {"cpu": "250m", "memory": "256Mi", "ephemeral-storage": "5Gi"},
                                     "limits": {}}


def test_a_request_alone_sets_the_limit_to_it_and_a_zero_limit_lifts_it():
    assert sidecar_resources({"gke-gcsfuse/cpu-request": "1"})["limits"]["cpu"] == "1"
    lifted = sidecar_resources({"gke-gcsfuse/cpu-request": "1", "gke-gcsfuse/cpu-limit": "0"})
    assert lifted["requests"]["cpu"] == "1" and "cpu" not in lifted["limits"]
    assert sidecar_resources({"gke-gcsfuse/memory-limit": "2Gi"})["requests"]["memory"] == "2Gi"


def test_the_sidecar_goes_first_as_a_native_sidecar_and_the_pods_own_cache_volume_is_kept():
    cache = {"name": "gke-gcsfuse-cache", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}
    pod = _pod({"gke-gcsfuse/volumes": "true"}, [cache])
    pod["spec"]["initContainers"] = [{"name": "setup"}]
    out = inject(pod)
    assert [c["name"] for c in out["spec"]["initContainers"]] == [SIDECAR, "setup"]
    assert out["spec"]["initContainers"][0]["restartPolicy"] == "Always"
    names = [v["name"] for v in out["spec"]["volumes"]]
    assert names == ["gke-gcsfuse-tmp", "gke-gcsfuse-buffer", "gke-gcsfuse-cache"]
    assert out["spec"]["volumes"][-1] == cache


def test_pods_without_the_annotation_or_with_the_sidecar_are_left_alone():
    assert inject(_pod({})) is None
    assert inject(_pod({"gke-gcsfuse/volumes": "false"})) is None
    once = inject(_pod({"gke-gcsfuse/volumes": "true"}))
    assert inject(once) is None


def test_the_stacks_annotations_give_the_requests_the_fit_model_counts():
    for stack in ("dev", "a4"):  # a TPU pool, a GPU pool
        [contract] = reader.load_files(stack, ROOT).contracts().values()
        annotations = sidecar_annotations(contract)
        resources = sidecar_resources(annotations)
        assert resources["requests"] == {r: annotations[f"gke-gcsfuse/{r}-request"]
                                         for r in ("cpu", "memory", "ephemeral-storage")}
        assert resources["limits"] == resources["requests"]  # limits equal to requests, Standard or Autopilot


def test_the_review_answers_with_a_json_patch():
    review = {"request": {"uid": "u1", "operation": "CREATE", "object": _pod({"gke-gcsfuse/volumes": "true"})}}
    response = review_response(review)["response"]
    assert response["uid"] == "u1" and response["allowed"] and response["patchType"] == "JSONPatch"
