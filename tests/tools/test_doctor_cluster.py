"""`make doctor` for a stack on an existing cluster (tools/doctor/cluster_checks.py): each check against the
cluster's answers, a passing cluster and each way one fails; the real API server's answers are the e2e's
(e2e/tests/test_handoff.py: the doctor as the deployer, before and after the handoff's RBAC)."""

from __future__ import annotations

import json
import shutil

import pytest

from stack.reader import load_files
from tests.support.pulumi_harness import ROOT
from tools.doctor import checks
from tools.doctor.answers import Asked, Ran
from tools.doctor.cluster_checks import cluster_findings
from tools.doctor.checks import MISS, OK, SKIP, WARN
from tests.tools.test_doctor import HERE

# JobSet as the stacks' default Helm release (Helm's annotations on the configuration).
JOBSET_WEBHOOK = {"metadata": {"name": "jobset-validating-webhook-configuration",
                               "annotations": {"meta.helm.sh/release-name": "jobset",
                                               "meta.helm.sh/release-namespace": "jobset-system"}},
                  "webhooks": [{"rules": [{"apiGroups": ["jobset.x-k8s.io"]}],
                                "clientConfig": {"service": {"namespace": "jobset-system",
                                                             "name": "jobset-webhook-service"}}}]}
# JobSet from its release manifests (kustomize's names: no Helm annotation, no chart label).
JOBSET_MANIFESTS = {"metadata": {"name": "jobset-validating-webhook-configuration",
                                 "labels": {"app.kubernetes.io/managed-by": "kustomize"}},
                    "webhooks": JOBSET_WEBHOOK["webhooks"]}


class Cluster:
    """The cluster's answers to the doctor's reads, by the read's key; what `deny` names is not allowed."""

    def __init__(self, *, answering=True, namespace=True, labels=None, deny=(), webhooks=(JOBSET_WEBHOOK,),
                 image="registry.k8s.io/jobset/jobset:v0.12.0", quotas=()):
        self.answering, self.namespace, self.labels, self.deny = answering, namespace, labels or {}, set(deny)
        self.webhooks, self.image, self.quotas, self.asked = list(webhooks), image, list(quotas), []

    def kube(self, key: str, ask, connect) -> Asked:
        self.asked.append(key)
        if not self.answering:
            return Asked(0, None, "MaxRetryError: connection refused")
        if key == "version":
            return Asked(200, {"gitVersion": "v1.35.4"})
        if key.startswith("namespace "):
            return Asked(200, {"metadata": {"labels": self.labels}}) if self.namespace else Asked(404, None, "404 Not Found")
        if key.startswith("access "):
            attributes = json.loads(key.removeprefix("access "))
            allowed = (attributes["verb"], attributes["resource"]) not in self.deny
            return Asked(201, {"status": {"allowed": allowed}})
        if key == "webhook configurations":
            return Asked(200, self.webhooks)
        if key.startswith("deployment "):
            return Asked(200, {"spec": {"template": {"spec": {"containers": [{"image": self.image}]}}}})
        if key.startswith("quotas "):
            return Asked(200, self.quotas)
        return Asked(200, [])


@pytest.fixture
def root(tmp_path):
    for program in ("Pulumi.yaml", "__main__.py"):  # the handoff's rights come from the program's objects
        shutil.copy(ROOT / program, tmp_path)
    shutil.copy(HERE / "Pulumi.doctor-existing.yaml", tmp_path)
    return tmp_path


def found(root, cluster: Cluster) -> dict[str, checks.Finding]:
    return {f.check: f for f in cluster_findings(cluster, load_files("doctor-existing", root), root)}


def test_a_ready_cluster_passes_every_check(root):
    cluster = Cluster(labels={"pod-security.kubernetes.io/enforce": "baseline"})
    result = found(root, cluster)
    assert {c: f.status for c, f in result.items()} == {
        "cluster": OK, "namespace": OK, "Kubernetes rights": OK, "controller jobset": OK, "namespace policy": OK}
    assert result["cluster"].detail == "context gke_ml-team-prod_us-east5_team-cluster: Kubernetes v1.35.4"
    assert result["controller jobset"].detail == "v0.12.0 in jobset-system"
    # Read by name, as the chart names the default release's Deployment: the handoff grants exactly that.
    assert "deployment jobset-system/jobset-controller" in cluster.asked
    assert sum(key.startswith("access ") for key in cluster.asked) > 20  # every verb of the handoff, asked


def test_a_controller_installed_otherwise_than_the_stack_says_is_a_miss_naming_the_value_to_set(root):
    """JobSet from its release manifests, the stack's key at its default: the doctor reads the Deployment the
    cluster's install names (`jobset-controller-manager`), and says the key the handoff's Role follows must
    change, and the RBAC be applied again."""
    cluster = Cluster(webhooks=(JOBSET_MANIFESTS,))
    jobset = found(root, cluster)["controller jobset"]
    assert "deployment jobset-system/jobset-controller-manager" in cluster.asked
    assert "deployment jobset-system/jobset-controller" not in cluster.asked
    assert jobset.status == MISS and jobset.detail.startswith(
        "existingCluster.controllerReleases.jobset: 'jobset-system/jobset' but jobset is installed from its release "
        "manifests in namespace 'jobset-system'") and jobset.detail.endswith("; v0.12.0 in jobset-system")
    assert jobset.fix.startswith("manifests; then the platform team applies the RBAC of `make handoff "
                                 "STACK=doctor-existing` again")
    stack = root / "Pulumi.doctor-existing.yaml"
    stack.write_text(stack.read_text().replace("    controllers: existing\n", "    controllers: existing\n"
                                               "    controllerReleases: {jobset: manifests}\n"))
    said = Cluster(webhooks=(JOBSET_MANIFESTS,))
    result = found(root, said)
    assert (result["controller jobset"].status, result["controller jobset"].detail) == (OK, "v0.12.0 in jobset-system")
    assert result["Kubernetes rights"].status == OK
    assert 'access {"group": "apps", "name": "jobset-controller-manager", "namespace": "jobset-system", ' \
           '"resource": "deployments", "verb": "get"}' in said.asked


def test_a_cluster_that_does_not_answer_is_one_miss_and_nothing_more_is_asked(root):
    cluster = Cluster(answering=False)
    [only] = cluster_findings(cluster, load_files("doctor-existing", root), root)
    assert (only.check, only.status) == ("cluster", MISS) and "does not answer: MaxRetryError" in only.detail
    assert "get-credentials" in only.fix and cluster.asked == ["version"]


def test_each_failing_check_says_what_to_do(root):
    result = found(root, Cluster(namespace=False, deny={("patch", "jobsets"), ("list", "resourcequotas")},
                                 webhooks=(), image=""))
    assert result["namespace"].status == MISS and "createNamespace: true" in result["namespace"].fix
    rights = result["Kubernetes rights"]
    assert rights.status == MISS and "2 of" in rights.detail and "patch jobsets in ml-team" in rights.detail
    assert rights.fix == "the platform team applies the RBAC of `make handoff STACK=doctor-existing` for you"
    assert result["controller jobset"].status == MISS and "install jobset v0.12.0" in result["controller jobset"].fix
    assert result["namespace policy"].status == SKIP


def test_a_controller_at_another_version_and_a_restricted_namespace(root):
    result = found(root, Cluster(image="registry.k8s.io/jobset/jobset:v0.10.1",
                                 labels={"pod-security.kubernetes.io/enforce": "restricted"}))
    assert result["controller jobset"].status == WARN and "v0.10.1 in jobset-system" in result["controller jobset"].detail
    policy = result["namespace policy"]
    assert policy.status == MISS and "needs Pod Security level 'baseline'" in policy.detail
    assert "kubectl label namespace ml-team pod-security.kubernetes.io/enforce=baseline" in policy.fix


def test_an_image_tag_that_names_no_version_is_said_so(root):
    jobset = found(root, Cluster(image="us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset:main"))[
        "controller jobset"]
    assert (jobset.status, jobset.detail) == (OK, "installed in jobset-system; its image tag 'main' names no version")


def test_a_quota_too_small_is_a_miss_naming_it(root):
    quota = {"metadata": {"name": "team"}, "spec": {"hard": {"requests.google.com/tpu": "0"}}}
    policy = found(root, Cluster(quotas=[quota]))["namespace policy"]
    assert policy.status == MISS and "ResourceQuota 'team'" in policy.detail


def test_an_existing_cluster_s_image_builder_advice_is_never_cloud_build():
    missing = checks.image_builder("docker", ["gemma-jax"], Ran(127, "", "docker: not found"), Ran(0), None,
                                   existing=True)
    assert missing.status == MISS and "cloudbuild" not in missing.fix and "images" in missing.fix
    assert "cloudbuild" in checks.image_builder("docker", ["gemma-jax"], Ran(127), Ran(0), None).fix
