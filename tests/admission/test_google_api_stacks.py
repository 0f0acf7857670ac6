"""Every stack's Google Cloud half, as the provider's requests, passes Google's API definitions; nothing is uncovered.

The stacks are the shipped ones and variants that take every branch of the
components declaring Google Cloud resources (authorized networks, public
nodes, a given network, flex-start capacity, a `gcs:` dataset, an existing
cluster's bucket grants), so that every input the program can set meets
the mapping at least once.
"""

from __future__ import annotations

import functools
import tempfile
import typing
from pathlib import Path

import pytest

from admission.google_api import coverage, discovery
from admission.google_api.judge import MAPPINGS, resource_findings, resources_findings
from stack.config import StackConfig
from tests.support.pulumi_harness import EXISTING_CLUSTER_STACKS, SHIPPED_STACKS, run_stack

ROOT = Path(__file__).resolve().parents[2]
P = "gke-finetune:"
_FLEX_POOL = {"name": "v6e-flex", "accelerator": "tpu-v6e", "topology": "1x1", "capacity": "flex-start",
              "autoscaling": {"minNodes": 0, "maxNodes": 1}}
_GCS_DATASET = {"name": "copied", "gcs": "gs://other-team-data/stories/"}


def _local_folder() -> str:
    """A `path:` dataset's folder on the machine running `pulumi up`: its files are uploaded as objects."""
    folder = Path(tempfile.mkdtemp(prefix="gke-finetune-upload-"))
    (folder / "train.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    return str(folder)


VARIANTS = {
    "authorized-networks": ("dev", {f"{P}network": {"authorizedNetworks": ["203.0.113.0/24", "198.51.100.0/24"]}}),
    "public-nodes": ("dev", {f"{P}network": {"privateNodes": False}}),
    "given-network": ("dev", {f"{P}network": {"existing": "shared-vpc", "existingSubnetwork": "shared-nodes"}}),
    "flex-start-and-gcs-dataset": ("dev", {f"{P}pools": [_FLEX_POOL], f"{P}runs": [],
                                           f"{P}datasets": [_GCS_DATASET]}),
    "path-dataset": ("dev", {f"{P}runs": [], f"{P}datasets": [{"name": "tickets", "path": _local_folder()}]}),
    "existing-cluster-grants": ("existing-dev", {
        f"{P}existingCluster": {"context": "gke_my-project-id_us-east5_team-cluster", "bucketGrants": True},
        f"{P}projectNumber": "123456789012"}),
}


@functools.cache
def declared(stack: str, variant: str = "") -> tuple[tuple[str, str, dict], ...]:
    overrides = VARIANTS[variant][1] if variant else None
    resources = run_stack(stack, overrides=overrides).resources
    return tuple((r.type, r.name, r.inputs) for r in resources)


def every_declaration() -> list[tuple[str, str, dict]]:
    found = [r for stack in (*SHIPPED_STACKS, *EXISTING_CLUSTER_STACKS) for r in declared(stack)]
    return found + [r for name, (stack, _) in VARIANTS.items() for r in declared(stack, name)]


@pytest.mark.parametrize("stack", [*SHIPPED_STACKS, *EXISTING_CLUSTER_STACKS])
def test_every_shipped_stack_passes_googles_definitions(stack):
    assert [str(f) for f in resources_findings(declared(stack))] == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_passes_googles_definitions(variant):
    resources = declared(VARIANTS[variant][0], variant)
    assert [t for t, _, _ in resources if t.startswith("gcp:")], "the variant declares Google Cloud resources"
    assert [str(f) for f in resources_findings(resources)] == []


def test_the_variants_take_the_branches_they_are_for():
    def inputs(variant, type_token):
        return [i for t, _, i in declared(VARIANTS[variant][0], variant) if t == type_token]

    [cluster] = inputs("authorized-networks", "gcp:container/cluster:Cluster")
    assert len(cluster["masterAuthorizedNetworksConfig"]["cidrBlocks"]) == 2
    assert not inputs("public-nodes", "gcp:compute/routerNat:RouterNat")
    assert not inputs("given-network", "gcp:compute/network:Network")
    assert any(p["nodeConfig"].get("flexStart") for p in inputs("flex-start-and-gcs-dataset",
                                                                 "gcp:container/nodePool:NodePool"))
    assert {o["name"] for o in inputs("path-dataset", "gcp:storage/bucketObject:BucketObject")} == {
        "datasets/dev/tickets/train.jsonl", "datasets/dev/tickets/.staged.json"}
    grants = inputs("existing-cluster-grants", "gcp:storage/bucketIAMMember:BucketIAMMember")
    assert {g["bucket"] for g in grants} == {"my-project-id-team-finetune"}


def test_the_stack_takes_every_release_channel_google_lists_but_the_deprecated_one():
    """The stack file's `releaseChannel` once left out EXTENDED, which Google's definition lists."""
    channel = discovery.schema("container.v1beta1", "ReleaseChannel")["properties"]["channel"]
    current = [v for v, old in zip(channel["enum"], channel["enumDeprecated"]) if not old]
    assert list(typing.get_args(StackConfig.model_fields["release_channel"].annotation)) == current
    extended = run_stack("dev", overrides={f"{P}releaseChannel": "EXTENDED"}).of_type("gcp:container/cluster:Cluster")
    assert extended[0].inputs["releaseChannel"] == {"channel": "EXTENDED"}
    assert resource_findings("gcp:container/cluster:Cluster", "cluster", extended[0].inputs) == []


def test_nothing_the_program_declares_is_uncovered():
    """Every Google Cloud resource type has a mapping and every input the program sets a rule."""
    resources = every_declaration()
    assert coverage.gaps(resources) == []
    assert {t for t, _, _ in resources if t.startswith("gcp:")} == set(MAPPINGS)


def test_a_new_type_or_a_new_input_is_a_gap():
    """What the coverage test would fail on: a resource type without a mapping, an input without a rule."""
    [(type_token, name, pool)] = [r for r in declared("dev") if r[1] == "cluster-system"]
    with_new_input = {**pool, "nodeConfig": {**pool["nodeConfig"], "localSsdEncryptionMode": "STANDARD_ENCRYPTION"}}
    assert coverage.gaps([(type_token, name, with_new_input),
                          ("gcp:compute/address:Address", "nat-ip", {"name": "nat-ip"})]) == [
        "gcp:compute/address:Address: no mapping to Google's API",
        "gcp:container/nodePool:NodePool nodeConfig.localSsdEncryptionMode: no rule",
    ]
    # ... and make plan refuses them too, naming what is missing.
    findings = [str(f) for f in resources_findings([(type_token, name, with_new_input)])]
    assert findings == [f"{name} (gcp:container/nodePool:NodePool) nodeConfig.localSsdEncryptionMode: "
                        "'STANDARD_ENCRYPTION' is not in the mapping to Google's API (admission/google_api): add its "
                        "rule, following the provider [API field nodePool.config.localSsdEncryptionMode, container "
                        "v1beta1 rev 20261027 container.projects.locations.clusters.nodePools.create]"]


def test_the_coverage_table_in_the_readme_is_current():
    readme = (ROOT / "admission" / "google_api" / "README.md").read_text()
    assert coverage.markdown(coverage.table(every_declaration())) in readme


def test_every_documented_default_no_request_carries_is_named_in_the_readme():
    readme = " ".join((ROOT / "admission" / "google_api" / "README.md").read_text().split())
    for type_token, paths in coverage.unjudged(every_declaration()).items():
        for path in paths:
            assert f"`{path}`" in readme, (type_token, path)


def test_a_documented_default_is_judged_as_if_the_program_set_it(monkeypatch):
    """Left unset, `enableShieldedNodes` is judged with its documented default; a wrong one is found, named."""
    from admission.google_api import defaults, request

    cluster = next(i for t, _, i in declared("dev") if t == "gcp:container/cluster:Cluster")
    built = request.build(MAPPINGS["gcp:container/cluster:Cluster"], "c",
                          {k: v for k, v in cluster.items() if k != "enableShieldedNodes"})
    assert built.body["cluster"]["shieldedNodes"] == {"enabled": True}
    assert built.defaults["enableShieldedNodes"] == "cluster.shieldedNodes.enabled"
    wrong = {**defaults.documented("gcp:container/cluster:Cluster"), "loggingService": 7}
    monkeypatch.setattr(request, "documented", lambda type_token: wrong)
    found = resource_findings("gcp:container/cluster:Cluster", "c", cluster)
    assert [(f.input_path, f.api_field) for f in found] == [
        ("loggingService (documented default)", "cluster.loggingService")], [str(f) for f in found]


def test_the_documented_defaults_are_read_from_the_sdk():
    from admission.google_api.defaults import documented

    cluster = documented("gcp:container/cluster:Cluster")
    assert cluster["enableShieldedNodes"] is True and cluster["enableAutopilot"] is False
    assert cluster["nodeConfig.machineType"] == "e2-medium"  # a block's Args class (_inputs.py)
    assert "nodeConfig.guestAccelerators" not in " ".join(cluster)  # lists of blocks get none
    assert documented("gcp:storage/bucket:Bucket")["publicAccessPrevention"] == "inherited"
    assert "minPortsPerVm" in documented("gcp:compute/routerNat:RouterNat")
    # "Defaults to 30s if not set." on an integer input: no literal of its type, no default.
    assert "icmpIdleTimeoutSec" not in documented("gcp:compute/routerNat:RouterNat")


def test_without_the_sdk_no_default_is_added_and_nothing_fails(monkeypatch):
    """The policy pack's environment has no pulumi-gcp: it judges what is set."""
    import builtins

    from admission.google_api import defaults

    real = builtins.__import__

    def no_sdk(name, *args, **kwargs):
        if name.startswith("pulumi_gcp"):
            raise ModuleNotFoundError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sdk)
    monkeypatch.setattr(defaults.importlib, "import_module", lambda name: no_sdk(name))
    assert defaults.documented.__wrapped__("gcp:container/cluster:Cluster") == {}
