"""The validator and the request builder, each rule firing on a bad case, against Google's real definitions."""

from __future__ import annotations

import pytest

from admission.google_api import discovery
from admission.google_api.judge import MAPPINGS, resource_findings
from admission.google_api.request import build
from admission.google_api.validate import body_violations, deprecations, parameter_violations

POOLS = "container.projects.locations.clusters.nodePools.create"
C = "container.v1beta1"
NODE_POOL = "gcp:container/nodePool:NodePool"


def pool_violations(**node_pool) -> list[tuple[str, object, str, str]]:
    return [(v.where, v.value, v.why, v.allowed) for v in body_violations(C, POOLS, {"nodePool": node_pool})]


def test_the_pinned_client_ships_every_definition_the_mapping_names():
    for mapping in MAPPINGS.values():
        assert discovery.method(mapping.api, mapping.method)["id"] == mapping.method
        assert discovery.revision(mapping.api).isdigit()
    with pytest.raises(discovery.DiscoveryError, match="no method container.projects.nothing"):
        discovery.method(C, "container.projects.nothing")


def test_a_valid_body_has_no_violation():
    assert pool_violations(name="p", initialNodeCount=1, config={"machineType": "e2-standard-4", "labels": {"a": "b"},
                           "accelerators": [{"acceleratorCount": "8", "acceleratorType": "nvidia-b200"}]}) == []


@pytest.mark.parametrize("node_pool, where, why, allowed", [
    # An unknown field, with the fields Google lists for that schema.
    ({"placementPolicy": {"kind": "COMPACT"}}, "nodePool.placementPolicy.kind",
     "is not a field of Google's PlacementPolicy", "policyName, tpuTopology, type"),
    # Wrong JSON types.
    ({"initialNodeCount": "two"}, "nodePool.initialNodeCount", "is not a 32-bit integer", "int32"),
    ({"initialNodeCount": True}, "nodePool.initialNodeCount", "is not a 32-bit integer", "int32"),
    ({"config": {"spot": "true"}}, "nodePool.config.spot", "is not a boolean", "true, false"),
    ({"config": {"tags": "a,b"}}, "nodePool.config.tags", "is not a list", "a JSON array"),
    ({"config": "e2"}, "nodePool.config", "is not an object", "a JSON object (NodeConfig)"),
    ({"config": {"labels": {"a": 1}}}, "nodePool.config.labels[a]", "is not a string", "a JSON string"),
    # Ranges of the integer formats.
    ({"initialNodeCount": 2**31}, "nodePool.initialNodeCount", "is outside the range of int32",
     "-2147483648 to 2147483647"),
    ({"config": {"accelerators": [{"acceleratorCount": "8.5"}]}}, "nodePool.config.accelerators[0].acceleratorCount",
     "is not a 64-bit integer (a decimal string in JSON)", "int64"),
    ({"config": {"accelerators": [{"acceleratorCount": str(2**63)}]}},
     "nodePool.config.accelerators[0].acceleratorCount", "is outside the range of int64",
     "-9223372036854775808 to 9223372036854775807"),
    # A duration (google-duration): seconds and an "s", not "1h".
    ({"config": {"maxRunDuration": "1h"}}, "nodePool.config.maxRunDuration",
     "is not a duration: seconds with up to 9 fractional digits and an 's', e.g. '3600s'", "google-duration"),
    # An enum.
    ({"autoscaling": {"locationPolicy": "balanced"}}, "nodePool.autoscaling.locationPolicy",
     "is not a value Google lists for NodePoolAutoscaling.locationPolicy", "LOCATION_POLICY_UNSPECIFIED, BALANCED, ANY"),
    # A field the API computes.
    ({"status": "RUNNING"}, "nodePool.status", "is output only in Google's NodePool (the API computes it)", ""),
])  # fmt: skip
def test_each_class_of_violation(node_pool, where, why, allowed):
    found = pool_violations(**node_pool)
    assert (where, why, allowed) in [(w, y, a) for w, _, y, a in found], found


def test_formats_in_their_own_words():
    assert pool_violations(config={"maxRunDuration": "3600s"}) == []
    assert pool_violations(config={"maxRunDuration": "0.5s"}) == []
    # byte: base64 (compute's Firewall has none; storage's Policy.etag is one).
    policy = {"bindings": [{"role": "roles/storage.objectViewer", "members": ["allUsers"]}]}
    assert body_violations("storage.v1", "storage.buckets.setIamPolicy", {**policy, "etag": "CAE="}) == []
    [bad] = body_violations("storage.v1", "storage.buckets.setIamPolicy", {**policy, "etag": "not base64!"})
    assert (bad.where, bad.why) == ("etag", "is not base64-encoded bytes")
    # date-time: RFC 3339 (storage's soft delete policy has one).
    insert = "storage.buckets.insert"
    stamped = {"name": "b", "softDeletePolicy": {"effectiveTime": "2026-01-31T12:00:00Z"}}
    assert body_violations("storage.v1", insert, stamped) == []
    [late] = body_violations("storage.v1", insert, {"name": "b", "softDeletePolicy": {"effectiveTime": "yesterday"}})
    assert (late.where, late.why) == ("softDeletePolicy.effectiveTime",
                                      "is not an RFC 3339 timestamp, e.g. '2026-01-31T12:00:00Z'")
    # A duration inside a map of objects (a repository's cleanup policies).
    create = "artifactregistry.projects.locations.repositories.create"
    assert [(v.where, v.why) for v in body_violations("artifactregistry.v1", create, {
        "cleanupPolicies": {"p": {"condition": {"olderThan": "86400s", "newerThan": "a week"}}}})] == [
        ("cleanupPolicies[p].condition.newerThan",
         "is not a duration: seconds with up to 9 fractional digits and an 's', e.g. '3600s'")]


def test_required_fields_and_parameters():
    # compute marks Firewall.name required for firewalls.insert (annotations.required).
    [missing] = body_violations("compute.beta", "compute.firewalls.insert", {"direction": "INGRESS"})
    assert (missing.where, missing.why) == ("name", "is required by Google's Firewall in compute.firewalls.insert")
    # GKE's description-marked "Required." fields: the node pool of a create request.
    assert [v.where for v in body_violations(C, POOLS, {})] == ["nodePool"]
    params = parameter_violations(C, POOLS, {"parent": "projects/p/locations/us-east5"})
    assert [(v.where, v.why, v.allowed) for v in params] == [
        ("parameter parent", "is not in the parameter's pattern", "^projects/[^/]+/locations/[^/]+/clusters/[^/]+$")]
    [absent] = parameter_violations("storage.v1", "storage.buckets.insert", {})
    assert (absent.where, absent.why) == ("parameter project", "is required by storage.buckets.insert and not given")


def test_public_access_prevention_values_come_from_googles_description():
    field = discovery.schema("storage.v1", "Bucket")["properties"]["iamConfiguration"]["properties"][
        "publicAccessPrevention"]
    assert discovery.described_values("storage.v1", "Bucket.iamConfiguration.publicAccessPrevention", field) == (
        "inherited", "enforced")
    reworded = {**field, "description": "Public access prevention."}
    with pytest.raises(discovery.DiscoveryError, match="no longer lists the values"):
        discovery.described_values("storage.v1", "Bucket.iamConfiguration.publicAccessPrevention", reworded)


def test_deprecated_fields_and_values_are_notes_not_violations():
    create = "container.projects.locations.clusters.create"
    body = {"cluster": {"name": "c", "initialNodeCount": 1, "releaseChannel": {"channel": "UNSPECIFIED"}}}
    assert body_violations(C, create, body) == []
    assert [(v.where, v.why) for v in deprecations(C, create, body)] == [
        ("cluster.initialNodeCount", "is deprecated in Google's Cluster"),
        ("cluster.releaseChannel.channel", "is a value Google deprecates for ReleaseChannel.channel")]


# --- the request builder --------------------------------------------------------------------


def test_a_node_pool_becomes_the_body_expand_node_pool_builds():
    inputs = {"project": "p", "location": "us-east5", "cluster": "projects/p/locations/us-east5/clusters/c",
              "name": "a4", "nodeLocations": ["us-east5-b"], "initialNodeCount": 0.0,
              "autoscaling": {"totalMinNodeCount": 0.0, "totalMaxNodeCount": 2.0, "locationPolicy": "ANY"},
              "nodeConfig": {"oauthScopes": ["cloud-platform"], "guestAccelerators": [
                  {"type": "nvidia-b200", "count": 8.0, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}]}}
    request = build(MAPPINGS[NODE_POOL], "pool-a4", inputs)
    assert request.params == {"parent": "projects/p/locations/us-east5/clusters/c"}
    assert request.body == {"nodePool": {
        "name": "a4", "locations": ["us-east5-b"], "initialNodeCount": 0,
        "autoscaling": {"enabled": True, "totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"},
        "config": {"oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
                   "accelerators": [{"acceleratorType": "nvidia-b200", "acceleratorCount": 8,
                                     "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}]}}}
    assert request.origins["nodePool.config.accelerators[0].acceleratorType"] == "nodeConfig.guestAccelerators[0].type"
    assert request.uncovered == [] and request.refusals == []


def test_a_cluster_is_sent_as_the_provider_sends_it():
    inputs = {"project": "p", "location": "us-east5", "name": "c", "networkingMode": "VPC_NATIVE",
              "network": "projects/p/global/networks/vpc", "subnetwork": "nodes", "deletionProtection": True,
              "privateClusterConfig": {"enablePrivateNodes": True, "enablePrivateEndpoint": False},
              "masterAuthorizedNetworksConfig": {"cidrBlocks": [], "gcpPublicCidrsAccessEnabled": False}}
    request = build(MAPPINGS["gcp:container/cluster:Cluster"], "cluster", inputs)
    assert request.body == {"cluster": {
        "name": "c", "ipAllocationPolicy": {"useIpAliases": True}, "network": "projects/p/global/networks/vpc",
        "subnetwork": "projects/p/regions/us-east5/subnetworks/nodes",
        "networkConfig": request.body["cluster"]["networkConfig"],
        "controlPlaneEndpointsConfig": {"ipEndpointsConfig": {
            "enablePublicEndpoint": True,
            "authorizedNetworksConfig": {"enabled": True, "gcpPublicCidrsAccessEnabled": False}}},
        # What the cluster leaves unset, with the defaults pulumi-gcp documents (defaults.py).
        "autopilot": {"enabled": False, "workloadPolicyConfig": {"allowNetAdmin": False}},
        "shieldedNodes": {"enabled": True}, "legacyAbac": {"enabled": False},
        "loggingService": "logging.googleapis.com/kubernetes",
        "monitoringService": "monitoring.googleapis.com/kubernetes"}}
    assert request.body["cluster"]["networkConfig"] == {"defaultEnablePrivateNodes": True,
                                                        "enableCiliumClusterwideNetworkPolicy": False}
    assert request.not_sent == ["deletionProtection"]


def test_an_unnamed_router_gets_the_bridges_name_and_an_unknown_router_is_left_to_the_engine():
    router = build(MAPPINGS["gcp:compute/router:Router"], "network-router", {"project": "p", "region": "us-east5"})
    name = router.body["name"]
    assert name.startswith("network-router-") and len(name) == len("network-router-") + 7
    assert build(MAPPINGS["gcp:compute/router:Router"], "network-router", {}).body["name"] == name  # stable
    nat = build(MAPPINGS["gcp:compute/routerNat:RouterNat"], "nat",
                {"project": "p", "region": "us-east5", "router": "04da6b54-80e4-46f7-96ec-b56ff0331ba9"})
    assert repr(nat.params["router"]) == "<unknown until created>"
    assert parameter_violations("compute.beta", "compute.routers.patch", nat.params) == []


def test_two_inputs_on_one_field_and_a_value_the_provider_refuses():
    both = resource_findings(NODE_POOL, "p", {"initialNodeCount": 1, "nodeCount": 2})
    assert [(f.input_path, f.why) for f in both] == [
        ("nodeCount", "is sent to nodePool.initialNodeCount, which initialNodeCount sets too: "
                      "the provider takes one of them")]
    [mode] = resource_findings("gcp:container/cluster:Cluster", "cluster", {"name": "c", "networkingMode": "VPC"})
    assert (mode.input_path, mode.allowed) == ("networkingMode", "VPC_NATIVE, ROUTES")


def test_unknown_values_are_not_judged():
    unknown = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    assert resource_findings(NODE_POOL, "p", {"cluster": unknown, "placementPolicy": {"type": unknown},
                                              "nodeConfig": {"serviceAccount": None}}) == []


def test_an_unmapped_google_cloud_type_is_a_finding_and_other_types_are_not_judged():
    [finding] = resource_findings("gcp:compute/address:Address", "ip", {"name": "ip"})
    assert "no mapping to Google's API" in finding.why
    assert resource_findings("kubernetes:core/v1:Namespace", "ns", {"metadata": {"name": "x"}}) == []


def test_a_folder_is_the_folders_insert_request_the_provider_sends():
    """storage.folders.insert is in the pinned storage v1 document: a folder's name goes in the body, its bucket
    in the URL, and no `recursive` (the provider sends none: its parent must exist, components/bucket_folders.py)."""
    method = discovery.method("storage.v1", "storage.folders.insert")
    assert method["path"] == "b/{bucket}/folders" and "recursive" in method["parameters"]
    request = build(MAPPINGS["gcp:storage/folder:Folder"], "data-folder-checkpoints/dev/",
                    {"bucket": "b", "name": "checkpoints/dev/"})
    assert (request.params, request.body) == ({"bucket": "b"}, {"name": "checkpoints/dev/"})
    assert resource_findings("gcp:storage/folder:Folder", "f", {"bucket": "b", "name": "checkpoints/dev/"}) == []
    [missing] = parameter_violations("storage.v1", "storage.folders.insert", {})
    assert (missing.where, missing.why) == ("parameter bucket", "is required by storage.folders.insert and not given")
    [wrong] = body_violations("storage.v1", "storage.folders.insert", {"name": "d/", "recursive": True})
    assert (wrong.where, wrong.why) == ("recursive", "is not a field of Google's Folder")
