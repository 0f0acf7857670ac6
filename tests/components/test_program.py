"""The whole program under Pulumi mocks, for every shipped stack: what it declares."""

import functools

import pytest
import yaml

from components.identity import NODE_ROLES
from core.names import POOL_LABEL
from tests.support.pulumi_harness import ROOT, SHIPPED_STACKS, run_stack

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
TPU_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
SPOT_TAINT = {"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NO_SCHEDULE"}
# The principals of the stack's Kubernetes service accounts, with the mocks' project number.
PRINCIPALS = (
    "principal://iam.googleapis.com/projects/123456789012/locations/global/"
    "workloadIdentityPools/my-project-id.svc.id.goog/subject/ns/finetune/sa/"
)


def trainer_principal(stack: str) -> str:
    """The stack's own trainer account: no other stack of the project holds its grants."""
    return f"{PRINCIPALS}{stack}-trainer"


@functools.cache
def deployed(stack):
    return run_stack(stack)


def accelerator_pools(stack):
    return {r.inputs["name"]: r.inputs for r in deployed(stack).of_type(NODE_POOL) if r.name != "cluster-system"}


def only(stack, type_token):
    found = deployed(stack).of_type(type_token)
    assert len(found) == 1, [r.name for r in found]
    return found[0]


# --- every stack ----------------------------------------------------------------


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_components_follow_the_anatomy(stack):
    d = deployed(stack)
    components = {r.urn: r for r in d.resources if not r.custom}
    assert {r.type for r in components.values()} >= {
        f"gke-finetune:platform:{n}" for n in
        ("Cluster", "NodePools", "DataBucket", "Identity", "Registry", "KubernetesAccess",
         "JobSetController", "RunsWorkspace")}
    assert all(r.type.startswith("gke-finetune:") for r in components.values())
    for r in d.resources:
        if r.custom:
            assert r.parent in components, f"{r.type} {r.name} is not parented to a component"


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_bucket_is_kept_and_private(stack):
    bucket = only(stack, "gcp:storage/bucket:Bucket")
    assert bucket.protect and bucket.retain_on_delete
    assert bucket.inputs["forceDestroy"] is False
    assert bucket.inputs["uniformBucketLevelAccess"] is True
    assert bucket.inputs["hierarchicalNamespace"] == {"enabled": True}
    assert bucket.inputs["publicAccessPrevention"] == "enforced"
    assert bucket.inputs["softDeletePolicy"]["retentionDurationSeconds"] > 0
    assert bucket.inputs["name"] == f"my-project-id-{stack}-finetune"


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_trainer_reads_the_bucket_and_writes_only_its_runs_checkpoints_and_profiles(stack):
    grants = [r.inputs for r in deployed(stack).of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
              if r.name.startswith("data-")]
    assert {g["member"] for g in grants} == {trainer_principal(stack)}
    [read] = [g for g in grants if g["role"] == "roles/storage.objectViewer"]
    assert "condition" not in read
    writes = [g for g in grants if g["role"] == "roles/storage.objectUser"]
    runs = [j.inputs["metadata"]["name"] for j in deployed(stack).of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")]
    assert len(writes) == len(runs) == len(grants) - 1
    bucket = f"projects/_/buckets/my-project-id-{stack}-finetune"
    # One grant per run, each below that run's own prefixes only, which carry the stack (its export's,
    # exports/<stack>/<run>, too where it has `export:`).
    exporting = {"a4": {"gemma4-sql"}, "dev": {"gemma3-single-host"}}.get(stack, set())
    assert sorted(w["condition"]["expression"] for w in writes) == sorted(" || ".join(
        f'resource.name.startsWith("{bucket}/{kind}/{prefix}/")'
        for prefix in (f"checkpoints/{stack}/{run}", f"profiles/{stack}/{run}",
                       *([f"exports/{stack}/{run}"] if run in exporting else []))
        for kind in ("objects", "folders")) for run in runs)


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_node_account_has_only_node_roles_and_registry_read(stack):
    node = f"serviceAccount:ft-{stack}-nodes@my-project-id.iam.gserviceaccount.com"
    project_roles = {(r.inputs["role"], r.inputs["member"]) for r in deployed(stack).of_type("gcp:projects/iAMMember:IAMMember")}
    assert project_roles == {(role, node) for role in NODE_ROLES}
    reader = only(stack, "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember").inputs
    assert (reader["role"], reader["member"], reader["repository"]) == (
        "roles/artifactregistry.reader", node, f"finetune-{stack}")  # a repository of the stack's own
    assert only(stack, "gcp:artifactregistry/repository:Repository").inputs["format"] == "DOCKER"


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_no_service_account_keys(stack):
    assert not [r for r in deployed(stack).resources if r.type == "gcp:serviceaccount/key:Key"]


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_the_trainer_ksa_is_the_principal_of_the_bucket_grants(stack):
    """Workload Identity Federation: the grants name the KSA itself, so a host-network pod's FUSE
    sidecar (which authenticates as the KSA, `hostNetworkPodKSA`) holds them as the trainer does."""
    [ksa] = [r.inputs["metadata"] for r in deployed(stack).of_type("kubernetes:core/v1:ServiceAccount")
             if r.name == "runs-workspace-ksa"]
    assert (ksa["name"], ksa["namespace"]) == (f"{stack}-trainer", "finetune")
    assert "annotations" not in ksa  # no Google service account to impersonate
    assert trainer_principal(stack).endswith(f"/subject/ns/{ksa['namespace']}/sa/{ksa['name']}")
    assert only(stack, "kubernetes:core/v1:Namespace").inputs["metadata"]["name"] == "finetune"
    assert not deployed(stack).of_type("gcp:serviceaccount/iAMMember:IAMMember")
    accounts = {r.inputs["accountId"] for r in deployed(stack).of_type("gcp:serviceaccount/account:Account")}
    assert accounts == {f"ft-{stack}-nodes"}
    # The grants wait for the cluster: its Workload Identity pool holds the principal.
    cluster = only(stack, CLUSTER).urn
    for grant in deployed(stack).of_type("gcp:storage/bucketIAMMember:BucketIAMMember"):  # the stager's too
        assert cluster in grant.dependencies


def test_multislice_sidecars_authenticate_as_the_principal_that_holds_the_bucket_roles():
    jobsets = deployed("tpu-multislice").of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    [pod] = [j.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"] for j in jobsets]
    assert pod["hostNetwork"] is True and pod["serviceAccountName"] == "tpu-multislice-trainer"
    assert all(v["csi"]["volumeAttributes"]["hostNetworkPodKSA"] == "true" for v in pod["volumes"] if "csi" in v)
    roles = {r.inputs["role"] for r in deployed("tpu-multislice").of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
             if r.inputs["member"] == trainer_principal("tpu-multislice")}
    assert roles == {"roles/storage.objectViewer", "roles/storage.objectUser"}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_jobset_chart_pinned(stack):
    [release] = [r for r in run_stack(stack).of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "jobset"]
    assert release.inputs["chart"] == "oci://registry.k8s.io/jobset/charts/jobset"
    assert release.inputs["version"] == "0.12.0"
    provider = only(stack, "pulumi:providers:kubernetes")
    assert release.provider.startswith(provider.urn)
    kubeconfig = provider.inputs["kubeconfig"]
    # The DNS-based endpoint (the default), whose certificate needs no cluster CA.
    config = yaml.safe_load(kubeconfig)
    [cluster] = config["clusters"]
    assert set(cluster["cluster"]) == {"server"} and cluster["cluster"]["server"].startswith("https://gke-mock-")
    assert cluster["cluster"]["server"].endswith(".gke.goog") and "203.0.113.10" not in kubeconfig
    assert "gke-gcloud-auth-plugin" in kubeconfig
    assert "token:" not in kubeconfig


def test_a_stack_with_authorized_networks_reaches_the_ip_endpoint_with_the_cluster_ca():
    d = run_stack("dev", overrides={"gke-finetune:network": {"authorizedNetworks": ["203.0.113.0/24"]}})
    [provider] = d.of_type("pulumi:providers:kubernetes")
    [cluster] = yaml.safe_load(provider.inputs["kubeconfig"])["clusters"]
    assert cluster["cluster"] == {"server": "https://203.0.113.10", "certificate-authority-data": "Q0EtREFUQQ=="}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_cluster_security_and_identity(stack):
    c = only(stack, CLUSTER).inputs
    assert c["deletionProtection"] is True
    assert c["releaseChannel"] == {"channel": "REGULAR"}
    assert c["networkingMode"] == "VPC_NATIVE"
    if stack == "autopilot":
        assert c["enableAutopilot"] is True
        defaults = c["clusterAutoscaling"]["autoProvisioningDefaults"]
        assert defaults["serviceAccount"] == f"ft-{stack}-nodes@my-project-id.iam.gserviceaccount.com"
    else:
        assert c["removeDefaultNodePool"] is True
        assert c["enableShieldedNodes"] is True
        assert c["workloadIdentityConfig"] == {"workloadPool": "my-project-id.svc.id.goog"}
        assert c["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_outputs_a_user_needs_next(stack):
    out = deployed(stack).outputs
    region = only(stack, CLUSTER).inputs["location"]
    assert out["getCredentials"] == (
        f"gcloud container clusters get-credentials finetune-{stack} --location {region} --project my-project-id"
        " --dns-endpoint")
    assert out["bucketUrl"] == f"gs://my-project-id-{stack}-finetune"
    assert out["registryUrl"] == f"{region}-docker.pkg.dev/my-project-id/finetune-{stack}"
    assert out["trainerPrincipal"] == trainer_principal(stack)
    assert {"clusterName", "clusterLocation", "nodeServiceAccount", "pools"} <= set(out)


@pytest.mark.parametrize("stack", [s for s in SHIPPED_STACKS if s != "autopilot"])
def test_standard_accelerator_pools_are_locked_down(stack):
    for name, p in accelerator_pools(stack).items():
        cfg = p["nodeConfig"]
        assert cfg["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        pool = name.rsplit("-s", 1)[0] if "-s" in name else name
        queued = {"cloud.google.com/gke-queued": "true"} if p.get("queuedProvisioning") else {}
        assert cfg["labels"] == {POOL_LABEL: pool, **queued}
        assert cfg["serviceAccount"].startswith(f"ft-{stack}-nodes@")
        assert cfg["shieldedInstanceConfig"] == {"enableIntegrityMonitoring": True, "enableSecureBoot": True}


# --- per stack ---------------------------------------------------------------------


def test_dev_single_host_v6e():
    pools = accelerator_pools("dev")
    assert list(pools) == ["v6e-1x1"]
    p = pools["v6e-1x1"]
    assert p["nodeConfig"]["machineType"] == "ct6e-standard-1t"
    assert "placementPolicy" not in p
    assert p["nodeConfig"]["taints"] == [TPU_TAINT]
    assert p["autoscaling"]["totalMinNodeCount"] == 0 and p["autoscaling"]["totalMaxNodeCount"] == 1
    assert p["nodeLocations"] == ["us-east5-b"]
    system = deployed("dev").named("cluster-system").inputs
    assert system["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert "taints" not in system["nodeConfig"]


def test_multihost_slice_topology_and_node_count():
    p = accelerator_pools("tpu-multihost")["v6e-2x4"]
    assert p["nodeConfig"]["machineType"] == "ct6e-standard-4t"
    assert p["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "2x4"}
    # GKE sizes a multi-host slice against the per-zone bounds; the slice is in one zone.
    assert p["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 2, "locationPolicy": "ANY"}  # VMs of one 2x4 slice
    assert p["nodeLocations"] == ["us-east5-b"]


def test_multislice_one_identical_pool_per_slice():
    pools = accelerator_pools("tpu-multislice")
    assert sorted(pools) == ["v6e-2x4-s0", "v6e-2x4-s1"]
    for p in pools.values():
        assert p["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "2x4"}
        assert p["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 2, "locationPolicy": "ANY"}
        assert p["nodeConfig"]["spot"] is True
        assert p["nodeConfig"]["taints"] == [TPU_TAINT, SPOT_TAINT]
        assert p["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
        assert p["nodeConfig"]["labels"] == {POOL_LABEL: "v6e-2x4"}
    selector = deployed("tpu-multislice").outputs["pools"]["v6e-2x4"]["nodeSelector"]
    assert selector[POOL_LABEL] == "v6e-2x4" and selector["cloud.google.com/gke-spot"] == "true"


def test_a4_b200_with_reservation():
    p = accelerator_pools("a4")["a4"]
    cfg = p["nodeConfig"]
    assert cfg["machineType"] == "a4-highgpu-8g"
    assert cfg["guestAccelerators"] == [
        {"type": "nvidia-b200", "count": 8, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}]
    assert cfg["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["my-a4-reservation"],
    }
    assert cfg["taints"] == [GPU_TAINT]
    assert cfg["spot"] is False
    assert cfg["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 32}  # A4's bundled local SSDs
    assert cfg["gvnic"] == {"enabled": True}


@pytest.mark.parametrize("stack", ["dev", "tpu-multihost", "tpu-multislice"])
def test_tpu_pools_keep_boot_disk_ephemeral_storage_and_the_default_nic(stack):
    for p in accelerator_pools(stack).values():
        assert "ephemeralStorageLocalSsdConfig" not in p["nodeConfig"]
        assert "gvnic" not in p["nodeConfig"]


def test_autopilot_declares_no_node_pools_but_publishes_contracts():
    assert deployed("autopilot").of_type(NODE_POOL) == []
    pools = deployed("autopilot").outputs["pools"]
    assert pools["a4"]["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-b200",
        "cloud.google.com/reservation-name": "my-a4-reservation",
        "cloud.google.com/reservation-affinity": "specific",
        "cloud.google.com/gke-gpu-driver-version": "latest",
    }
    assert pools["v6e-1x1"]["nodeSelector"]["cloud.google.com/gke-spot"] == "true"
    assert all(p["nodePools"] == [] for p in pools.values())


def test_queued_and_flex_start_pools_start_empty_without_reservations():
    pools = [
        {"name": "q", "accelerator": "tpu-v6e", "topology": "2x4", "machineType": "ct6e-standard-4t", "capacity": "queued"},
        {"name": "f", "accelerator": "nvidia-b200", "capacity": "flex-start"},
    ]
    # us-central1-b offers both TPU v6e and B200 (core/offerings.py).
    d = run_stack("dev", overrides={"gke-finetune:pools": pools, "gke-finetune:runs": [], "gcp:region": "us-central1",
                                    "gke-finetune:zones": ["us-central1-b"]})
    by_name = {r.inputs["name"]: r.inputs for r in d.of_type(NODE_POOL)}
    assert by_name["q"]["queuedProvisioning"] == {"enabled": True}
    assert by_name["f"]["nodeConfig"]["flexStart"] is True
    assert by_name["q"]["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 2, "locationPolicy": "ANY"}
    assert by_name["f"]["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 1, "locationPolicy": "ANY"}
    for name in ("q", "f"):
        p = by_name[name]
        assert p["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
        assert p["management"]["autoRepair"] is False


@pytest.mark.parametrize("stack", ["dev", "tpu-multihost", "a4"])
def test_min_nodes_is_not_coupled_to_the_pool_s_creation_size(stack):
    """initialNodeCount forces a new pool when it changes: the pools ignore it after creation,
    so a changed minNodes only updates the autoscaler's bounds."""
    for pool in deployed(stack).of_type(NODE_POOL):
        if pool.name != "cluster-system":
            assert "initialNodeCount" in pool.ignore_changes
    groups = {"dev": "v6e-1x1", "tpu-multihost": "v6e-2x4", "a4": "a4"}
    [before] = [p for p in deployed(stack).of_type(NODE_POOL) if p.inputs["name"] == groups[stack]]
    top = int(before.inputs["autoscaling"].get("maxNodeCount") or before.inputs["autoscaling"]["totalMaxNodeCount"])
    raised = run_stack(stack, overrides={"gke-finetune:pools": [
        {**p, "autoscaling": {**p.get("autoscaling", {}), "minNodes": top}} for p in _stack_pools(stack)]})
    [after] = [p for p in raised.of_type(NODE_POOL) if p.inputs["name"] == groups[stack]]
    changed = {k for k in before.inputs if before.inputs[k] != after.inputs.get(k)}
    assert changed <= {"initialNodeCount", "autoscaling"} and "autoscaling" in changed


def _stack_pools(stack):
    import yaml

    from tests.support.pulumi_harness import ROOT

    return yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]["gke-finetune:pools"]


