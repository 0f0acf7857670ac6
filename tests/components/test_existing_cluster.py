"""A stack for an existing cluster, under the SDK's mocks: only the in-cluster parts, on the cluster's node pools."""

import pytest
import yaml

from core.catalog import NODEPOOL_LABEL
from core.names import POOL_LABEL
from stack.problems import ConfigError
from tests.support.pulumi_harness import ROOT, declared_before_error, run_stack
from tools.plan.collect import collect
from tools.offline import EXISTING_CLUSTER_STACKS, MOCK_EXISTING_ENDPOINT, SHIPPED_STACKS

STACK = "existing-dev"
KEY = "gke-finetune:existingCluster"
POOLS = "gke-finetune:pools"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
RELEASE = "kubernetes:helm.sh/v3:Release"
GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"
PROVIDER = "pulumi:providers:kubernetes"
NAMESPACE = "kubernetes:core/v1:Namespace"
# Everything a stack for an existing cluster declares, and nothing else: not even its namespace, which the
# platform team made (unless the stack says createNamespace).
IN_CLUSTER = {PROVIDER, RELEASE, "kubernetes:core/v1:ServiceAccount", "kubernetes:batch/v1:Job", JOBSET}
COMPONENTS = {f"gke-finetune:{t}" for t in ("platform:ExistingClusterAccess", "platform:RunsWorkspace",
                                            "platform:JobSetController", "platform:DatasetStaging", "workloads:Runs")}
PRINCIPAL = "principal://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/" \
            "my-project-id.svc.id.goog/subject/ns/ml-team/sa/existing-dev-"


def stack_file(key):
    return yaml.safe_load((ROOT / f"Pulumi.{STACK}.yaml").read_text())["config"][key]


def existing(**changes):
    return {KEY: {**stack_file(KEY), **changes}}


def pod(jobset):
    return jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def queued_pools():
    """Two single-host pools of the cluster, a run laddered from one to the other (through Kueue)."""
    pool = {"accelerator": "tpu-v6e", "topology": "1x1", "autoscaling": {"maxNodes": 2}}
    run = {"name": "laddered", "trainer": "gemma-jax", "pool": "first", "ladder": ["second"], "data": "tinystories",
           "args": ["--batch_size", "64"]}  # what one v6e chip holds
    return {POOLS: [{**pool, "name": "first", "nodePool": "team-tpu-a"},
                    {**pool, "name": "second", "capacity": "spot", "nodePool": "team-tpu-spot"}],
            "gke-finetune:runs": [run]}


def test_the_existing_cluster_stack_is_kept_apart_from_the_platform_stacks():
    assert EXISTING_CLUSTER_STACKS == (STACK,) and STACK not in SHIPPED_STACKS


def test_it_declares_exactly_the_in_cluster_resources():
    d = run_stack(STACK)
    assert {r.type for r in d.resources if r.custom} == IN_CLUSTER
    assert {r.type for r in d.resources if not r.custom} == COMPONENTS
    assert not [r for r in d.resources if r.type.startswith("gcp:")]


def test_its_provider_uses_the_named_context_and_the_default_kubeconfig():
    provider = run_stack(STACK).of_type(PROVIDER)[0].inputs
    assert provider["context"] == "gke_my-project-id_us-east5_team-cluster"
    assert "kubeconfig" not in provider  # $KUBECONFIG or ~/.kube/config, as kubectl reads it
    assert provider["clusterIdentifier"] == "gke_my-project-id_us-east5_team-cluster"  # not the file's content
    given = run_stack(STACK, overrides=existing(kubeconfig="/etc/team/kubeconfig")).of_type(PROVIDER)[0].inputs
    assert given["kubeconfig"] == "/etc/team/kubeconfig"


def test_by_name_and_location_it_reads_the_endpoint_and_authenticates_with_the_gcloud_plugin():
    change = {KEY: {"name": "team-cluster", "location": "us-east5"}}
    d = run_stack(STACK, overrides=change)
    config = yaml.safe_load(d.of_type(PROVIDER)[0].inputs["kubeconfig"])
    assert config["clusters"][0]["cluster"] == {"server": f"https://{MOCK_EXISTING_ENDPOINT}",
                                               "certificate-authority-data": "Q0EtREFUQQ=="}
    assert config["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert not [r for r in d.resources if r.type.startswith("gcp:")]
    assert d.outputs["clusterName"] == "team-cluster"


def test_at_its_dns_endpoint_the_kubeconfig_carries_no_cluster_ca():
    change = {KEY: {"name": "team-cluster", "location": "us-east5", "dnsEndpoint": True}}
    config = yaml.safe_load(run_stack(STACK, overrides=change).of_type(PROVIDER)[0].inputs["kubeconfig"])
    assert config["clusters"][0]["cluster"] == {"server": "https://gke-mock-team-cluster.us-east5.gke.goog"}


def test_the_runs_select_the_clusters_node_pool_not_the_platform_label():
    d = run_stack(STACK)
    selector = pod(d.of_type(JOBSET)[0])["nodeSelector"]
    assert selector[NODEPOOL_LABEL] == "tpu-v6e-1x1" and POOL_LABEL not in selector
    staging = d.of_type("kubernetes:batch/v1:Job")[0].inputs["spec"]["template"]["spec"]
    assert "nodeSelector" not in staging  # no system pool of the platform's
    assert d.outputs["pools"]["v6e-1x1"]["nodePools"] == ["tpu-v6e-1x1"]


def test_a_multislice_pool_lands_on_its_slices_node_pools_by_affinity():
    pool = {"name": "ms", "accelerator": "tpu-v6e", "topology": "2x4", "machineType": "ct6e-standard-4t", "slices": 2,
            "nodePools": ["team-v6e-a", "team-v6e-b"]}
    run = {"name": "ms-run", "trainer": "gemma-jax", "pool": "ms", "data": "tinystories"}
    spec = pod(run_stack(STACK, overrides={POOLS: [pool], "gke-finetune:runs": [run]}).of_type(JOBSET)[0])
    assert NODEPOOL_LABEL not in spec["nodeSelector"]
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == [{"matchExpressions": [{"key": NODEPOOL_LABEL, "operator": "In",
                                           "values": ["team-v6e-a", "team-v6e-b"]}]}]


def test_kueue_flavors_and_the_ladders_affinity_name_the_clusters_node_pools():
    d = run_stack(STACK, overrides=queued_pools())
    flavors = {r.inputs["metadata"]["name"]: r.inputs["spec"]["nodeLabels"]
               for r in d.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")}
    # Cluster-scoped: named after the stack's namespace, so another team's stack can't collide with them.
    assert flavors["ml-team-first-ca3c40"] == {NODEPOOL_LABEL: "team-tpu-a"}
    assert flavors["ml-team-second-e3a99b"] == {NODEPOOL_LABEL: "team-tpu-spot", "cloud.google.com/gke-spot": "true"}
    spec = pod(d.of_type(JOBSET)[0])
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term[0]["matchExpressions"] == [{"key": NODEPOOL_LABEL, "operator": "In",
                                            "values": ["team-tpu-a", "team-tpu-spot"]}]
    assert POOL_LABEL not in str(spec)


def test_controllers_existing_declares_no_release_and_the_runs_wait_on_none():
    d = run_stack(STACK, overrides={**existing(controllers="existing"), **queued_pools()})
    assert not d.of_type(RELEASE)
    assert d.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")  # the queues are the stack's own
    # The ladder controller (manifests/ladder.py) is the stack's own too: namespaced objects only.
    ladder = {"kubernetes:apps/v1:Deployment", "kubernetes:core/v1:ConfigMap",
              "kubernetes:rbac.authorization.k8s.io/v1:Role", "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"}
    assert {r.type for r in d.resources if r.custom} <= IN_CLUSTER | ladder | {
        f"kubernetes:kueue.x-k8s.io/v1beta2:{k}" for k in ("ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass")}
    assert all(r.inputs["metadata"]["namespace"] == "ml-team" for t in ladder for r in d.of_type(t))
    run = d.of_type(JOBSET)[0]
    on = {r.urn: r.type for r in d.resources}
    assert RELEASE not in {on[u] for u in run.dependencies}


def test_charts_from_a_local_directory_are_chart_paths_without_a_repository():
    d = run_stack(STACK, overrides={"gke-finetune:charts": {"dir": "/opt/charts"}, **queued_pools()})
    releases = {r.name: r.inputs for r in d.of_type(RELEASE)}
    assert releases["jobset"]["chart"] == "/opt/charts/jobset" and releases["kueue"]["chart"] == "/opt/charts/kueue"
    assert all("repositoryOpts" not in r and "version" not in r for r in releases.values())


@pytest.mark.parametrize("repository, chart, repo", [
    ("oci://mirror.example.com/charts", "oci://mirror.example.com/charts/jobset", None),
    ("https://charts.example.com", "jobset", {"repo": "https://charts.example.com"}),
])
def test_charts_from_a_mirror_keep_the_pinned_version(repository, chart, repo):
    release = run_stack(STACK, overrides={"gke-finetune:charts": {"repository": repository}}).of_type(RELEASE)[0]
    assert release.inputs["chart"] == chart and release.inputs["version"] == "0.12.0"
    assert release.inputs.get("repositoryOpts") == repo


def test_bucket_grants_are_declared_only_when_asked_for():
    d = run_stack(STACK, overrides={**existing(bucketGrants=True), "gke-finetune:projectNumber": "123456789012"})
    grants = {(r.inputs["role"], r.inputs["member"].removeprefix(PRINCIPAL)) for r in d.of_type(GRANT)}
    assert grants == {("roles/storage.objectViewer", "trainer"), ("roles/storage.objectUser", "trainer"),
                      ("roles/storage.objectViewer", "stager"), ("roles/storage.objectUser", "stager")}
    assert all(r.inputs["bucket"] == "my-project-id-team-finetune" and r.inputs["member"].startswith(PRINCIPAL)
               for r in d.of_type(GRANT))
    assert {r.type for r in d.resources if r.type.startswith("gcp:")} == {GRANT}
    assert d.outputs["trainerPrincipal"] == PRINCIPAL + "trainer"


def test_without_grants_the_principals_are_exported_for_the_platform_team():
    d = run_stack(STACK, overrides={"gke-finetune:projectNumber": "123456789012"})
    assert not d.of_type(GRANT)
    assert (d.outputs["trainerPrincipal"], d.outputs["stagerPrincipal"]) == (PRINCIPAL + "trainer", PRINCIPAL + "stager")


@pytest.mark.parametrize("overrides, expected", [
    ({KEY: {"context": "c", "name": "n", "location": "us-east5"}}, "existingCluster: {'context': 'c', 'name': 'n', "
     "'location': 'us-east5'} names the cluster twice; allowed: either {context (, kubeconfig)} or {name, location}"),
    ({KEY: {"controllers": "install"}}, "existingCluster: not set, and the cluster is named neither"),
    ({KEY: {"name": "n"}}, "existingCluster.location: not set, and `name` is set"),
    ({KEY: {"context": "c", "dnsEndpoint": True}}, "existingCluster.dnsEndpoint: true with `context`"),
    ({KEY: {"context": "c", "controllers": "maybe"}}, "existingCluster.controllers: 'maybe'"),
    ({"gke-finetune:images": {}}, "images.gemma-jax: not set, and images can't be built for an existing cluster"),
    ({"gke-finetune:bucketName": ""}, "bucketName: not set, and the stack uses an existing cluster"),
    ({POOLS: [{"name": "v6e-1x1", "accelerator": "tpu-v6e", "topology": "1x1"}]},
     "pools[0].nodePool: not set, on pool 'v6e-1x1' of an existing cluster; allowed: the GKE node pool's name"),
    ({POOLS: [{"name": "ms", "accelerator": "tpu-v6e", "topology": "2x4", "machineType": "ct6e-standard-4t",
               "slices": 2, "nodePools": ["a"]}]},
     "pools[0].nodePools: ['a'] for 2 slice(s) of pool 'ms'; allowed: exactly 2 GKE node pool name(s)"),
    ({"gke-finetune:systemMachineType": "e2-standard-8"}, "systemMachineType: 'e2-standard-8' describes a cluster "
     "the stack would declare"),
    ({"gke-finetune:network": {"privateNodes": False}}, "network: {"),
    ({"gke-finetune:zones": ["us-east5-b"]}, "zones: ['us-east5-b'] describes a cluster"),
    ({KEY: {"context": "c", "bucketGrants": True}}, "projectNumber: not set, and existingCluster.bucketGrants is true"),
    ({"gke-finetune:charts": {"dir": "/c", "repository": "oci://m"}}, "charts: {'dir': '/c', 'repository': 'oci://m'}"
     " names two chart sources"),
    ({"gke-finetune:runs": [{"name": "r", "trainer": "gemma-jax", "pool": "nope", "data": "tinystories"}]},
     "runs[0].pool: 'nope' does not exist on run 'r'; allowed: 'v6e-1x1'"),
])
def test_a_wrong_existing_cluster_stack_is_refused_naming_the_key(overrides, expected):
    declared, err = declared_before_error(STACK, overrides=overrides)
    assert isinstance(err, ConfigError) and any(p.startswith(expected) for p in err.problems), err.problems
    assert declared.resources == []


def test_node_pools_are_refused_without_an_existing_cluster():
    pools = [{"name": "v6e-1x1", "accelerator": "tpu-v6e", "topology": "1x1", "nodePool": "x"}]
    _, err = declared_before_error("dev", overrides={POOLS: pools})
    assert "pools[0].nodePool: 'x' without `existingCluster`" in str(err)


def test_an_existing_autopilot_cluster_takes_shapes_and_declares_no_node_pool_label():
    shapes = [{"name": "v6e-1x1", "accelerator": "tpu-v6e", "topology": "1x1", "capacity": "spot"}]
    d = run_stack(STACK, overrides={"gke-finetune:mode": "autopilot", POOLS: [], "gke-finetune:shapes": shapes})
    selector = pod(d.of_type(JOBSET)[0])["nodeSelector"]
    assert selector["cloud.google.com/gke-spot"] == "true"
    assert NODEPOOL_LABEL not in selector and POOL_LABEL not in selector
    assert not [r for r in d.resources if r.type.startswith("gcp:")]


def test_the_plan_says_whose_control_plane_it_is():
    access = collect(STACK)["access"]
    assert access == ["control plane: an existing cluster's (context gke_my-project-id_us-east5_team-cluster), "
                      "as the platform team set it up"]
