"""The project's APIs: enabled by every stack, kept on destroy, and waited for by everything else."""

from __future__ import annotations

import functools

import pytest

from core.apis import CLOUD_BUILD_API, PLATFORM_APIS
from stack.apis import required_apis
from stack.config import StackConfig
from stack.reader import load_files
from tests.support.pulumi_harness import ROOT, SHIPPED_STACKS, run_stack

SERVICE = "gcp:projects/service:Service"
EXPECTED = {"container.googleapis.com", "compute.googleapis.com", "artifactregistry.googleapis.com",
            "iam.googleapis.com", "iamcredentials.googleapis.com", "cloudresourcemanager.googleapis.com",
            "storage.googleapis.com"}


@functools.cache
def deployed(stack, **overrides):
    return run_stack(stack, overrides=dict(overrides) or None)


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_stack_enables_the_apis_it_uses_and_never_disables_them(stack):
    services = deployed(stack).of_type(SERVICE)
    # The shipped stacks build with docker; Secret Manager only where a pod reads the Hugging Face token.
    hub = {"secretmanager.googleapis.com"} if load_files(stack, ROOT).reads_hub else set()
    assert {s.inputs["service"] for s in services} == EXPECTED | hub
    assert hub or stack != "a4", "a4's run reads the Hub"
    for s in services:
        assert s.inputs["project"] == "my-project-id"
        assert s.inputs["disableOnDestroy"] is False and s.inputs["disableDependentServices"] is False


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_other_cloud_resource_waits_for_the_apis(stack):
    # Kubernetes objects wait for the cluster, which waits for the APIs.
    d = deployed(stack)
    services = {s.urn for s in d.of_type(SERVICE)}
    waiting = [r for r in d.resources if r.custom and r.type != SERVICE
               and not r.type.startswith(("pulumi:providers:", "kubernetes:"))]
    assert waiting
    for r in waiting:
        assert services <= set(r.dependencies), f"{r.type} {r.name} does not wait for the APIs"


def test_cloud_build_is_enabled_only_when_an_image_is_built_with_it():
    cloud = deployed("dev", **{"gke-finetune:imageBuilder": "cloudbuild"})
    assert CLOUD_BUILD_API in {s.inputs["service"] for s in cloud.of_type(SERVICE)}
    base = {"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"], "imageBuilder": "cloudbuild"}
    assert required_apis(StackConfig.from_mapping(base)) == PLATFORM_APIS  # no run: nothing to build
