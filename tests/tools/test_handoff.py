"""`make handoff` (tools/plan/handoff.py, tools/plan/rbac.py): RBAC, IAM and the firewall rule an existing-cluster
stack needs, derived from what it declares. That these rights are enough, and that less is not, is the e2e's
(e2e/tests/test_handoff.py: `pulumi up` and `destroy` as a user holding them alone)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from manifests import kueue
from stack.problems import ConfigError
from tools import offline
from tools.offline import ROOT
from tools.plan import rbac
from tools.plan.handoff import PLACEHOLDER, Subjects, handoff
from tools.plan.rbac import WATCH, WRITE
from tests.support.ladder_stack import ladder_overrides
from stack.controller_releases import DEFAULT_INSTALLS, ControllerInstall

PREFIX = offline.PROJECT


def _rights(overrides: dict | None = None) -> rbac.Rights:
    deployment = offline.run_stack("existing-dev", overrides=overrides)
    objects, releases = rbac.declared({"type": r.type, "name": r.name, "inputs": r.inputs} for r in deployment.resources)
    return rbac.rights(objects, "ml-team", releases)


def _rules(rules) -> dict[tuple[str, str], rbac.Rule]:
    return {(r.group, res): r for r in rules for res in r.resources if r.names or r.verbs != WATCH}


def test_the_namespaced_kinds_get_the_provider_s_verbs_in_the_namespace_only():
    found = _rights()
    rules = _rules(found.namespaced)
    for kind in (("", "serviceaccounts"), ("batch", "jobs"), ("jobset.x-k8s.io", "jobsets")):
        assert rules[kind].verbs == (*WRITE, *WATCH) and not rules[kind].names, kind
    assert "update" not in {v for r in found.namespaced + found.cluster for v in r.verbs}  # server-side apply patches
    assert {res for r in found.namespaced for res in r.resources} >= {"pods", "events", "resourcequotas"}
    # The cluster: its namespace read by name, the controllers' webhook configurations and the queues and flavors
    # already on the pools listed; nothing written.
    assert {(r.group, r.resources, r.verbs, r.names) for r in found.cluster} == {
        ("", ("namespaces",), ("get",), ("ml-team",)),
        ("admissionregistration.k8s.io", ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"),
         ("list",), ()),
        ("kueue.x-k8s.io", ("clusterqueues", "resourceflavors"), ("list",), ())}
    [release] = found.not_covered
    assert release.startswith("Helm release 'jobset' (controllers: install)")


def test_cluster_scoped_objects_are_written_by_name_only():
    runs = yaml.safe_load((ROOT / "Pulumi.existing-dev.yaml").read_text())["config"][f"{PREFIX}:runs"]
    found = _rights({f"{PREFIX}:runs": [{**runs[0], "priority": "high"}], f"{PREFIX}:createNamespace": True,
                     f"{PREFIX}:existingCluster": {"context": "c", "controllers": "existing"}})
    written = {(r.group, r.resources[0]): r for r in found.cluster if r.verbs == WRITE}
    assert written[("kueue.x-k8s.io", "clusterqueues")].names == (kueue.cluster_queue_name("ml-team"),)
    [flavor] = written[("kueue.x-k8s.io", "resourceflavors")].names
    assert flavor.startswith(kueue.cluster_queue_name("ml-team"))
    assert written[("kueue.x-k8s.io", "workloadpriorityclasses")].names == tuple(sorted(
        kueue.priority_class_name("ml-team", p) for p in ("low", "normal", "high")))
    assert written[("", "namespaces")].names == ("ml-team",)
    watched = {(r.group, r.resources[0]) for r in found.cluster if r.verbs == WATCH and not r.names}
    assert set(written) <= watched  # deleting one waits for it to go
    assert ("kueue.x-k8s.io", "localqueues") in _rules(found.namespaced)
    assert found.not_covered == ()


def test_the_documents_are_a_role_a_cluster_role_and_their_bindings_for_the_deployer():
    found = handoff("existing-dev", ROOT, Subjects(users=("ana@example.com",), service_accounts=("ci@p.iam.gserviceaccount.com",)))
    assert [(d["kind"], d["metadata"]["name"]) for d in found.rbac] == [
        ("Role", "gke-finetune-existing-dev"), ("RoleBinding", "gke-finetune-existing-dev"),
        ("ClusterRole", "gke-finetune-existing-dev:ml-team"), ("ClusterRoleBinding", "gke-finetune-existing-dev:ml-team")]
    assert found.rbac[1]["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "ana@example.com"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "ci@p.iam.gserviceaccount.com"}]
    assert "--member 'serviceAccount:ci@p.iam.gserviceaccount.com'" in "\n".join(found.gcloud)
    assert not found.placeholder and handoff("existing-dev", ROOT).placeholder


def test_the_iam_commands_are_the_bucket_grants_the_stack_would_declare():
    script = handoff("existing-dev", ROOT, PLACEHOLDER).gcloud
    grants = [line for line in script if line.startswith("gcloud storage buckets add-iam-policy-binding")]
    # The trainer reads and writes its run's prefixes; the stager reads and writes its dataset's.
    assert len(grants) == 4
    assert all("'\"$PROJECT_NUMBER\"'" in line for line in grants)
    assert any("sa/existing-dev-trainer' --role roles/storage.objectUser --condition 'expression=resource.name."
               "startsWith(\"projects/_/buckets/my-project-id-team-finetune/objects/checkpoints/existing-dev/gemma3-single-host/\")"
               in line for line in grants)
    assert any(line.startswith("gcloud compute firewall-rules create finetune-existing-dev-webhooks") and
               line.endswith("--allow tcp:9443") for line in script)


def test_the_script_is_valid_shell(tmp_path):
    script = tmp_path / "gcloud.sh"
    script.write_text("\n".join(handoff("existing-dev", ROOT).gcloud) + "\n")
    assert subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True).returncode == 0


def test_a_stack_that_declares_its_own_cluster_has_nothing_to_hand_off():
    with pytest.raises(ConfigError, match="existingCluster: not set, and the stack declares its own cluster"):
        handoff("dev", ROOT)
    done = subprocess.run([sys.executable, "-m", "tools.plan", "handoff", "--stack", "dev"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 78 and "Traceback" not in done.stderr and "nothing to hand off" in done.stderr


def test_each_granted_verb_is_one_access_review():
    found = _rights()
    reviews = rbac.access_reviews(found)
    assert {"group": "jobset.x-k8s.io", "resource": "jobsets", "verb": "patch", "namespace": "ml-team"} in reviews
    assert {"group": "", "resource": "namespaces", "verb": "get", "name": "ml-team"} in reviews
    assert len(reviews) == sum(len(r.resources) * len(r.verbs) * max(1, len(r.names))
                               for r in (*found.namespaced, *found.cluster))


@pytest.mark.parametrize("kind, resource", [
    # As each API serves them: the Secrets Store CSI driver's CRD (secrets-store.csi.x-k8s.io_secretproviderclasses),
    # Kueue's and JobSet's CRDs, GKE's ComputeClass, the core and scheduling APIs.
    ("SecretProviderClass", "secretproviderclasses"), ("WorkloadPriorityClass", "workloadpriorityclasses"),
    ("ComputeClass", "computeclasses"), ("PriorityClass", "priorityclasses"), ("ClusterQueue", "clusterqueues"),
    ("ResourceFlavor", "resourceflavors"), ("ProvisioningRequestConfig", "provisioningrequestconfigs"),
    ("JobSet", "jobsets"), ("ServiceAccount", "serviceaccounts"), ("Service", "services"),
    ("Deployment", "deployments"), ("Policy", "policies"),
])
def test_a_kind_s_resource_is_the_name_its_api_serves(kind, resource):
    assert rbac.plural(kind) == resource


def test_with_existing_controllers_the_preview_s_reads_of_them_are_granted_by_name_in_their_namespaces():
    """A handoff-only deployer's preview reads the controllers' Deployments and Kueue's manager ConfigMap
    (components/preflight.py): `get` on exactly those names, a Role in each controller's namespace; with
    `controllers: install` nothing of theirs is read, so nothing is granted."""
    runs = yaml.safe_load((ROOT / "Pulumi.existing-dev.yaml").read_text())["config"][f"{PREFIX}:runs"]
    queued = {f"{PREFIX}:runs": [{**runs[0], "priority": "high"}],
              f"{PREFIX}:existingCluster": {"context": "c", "controllers": "existing"}}
    deployment = offline.run_stack("existing-dev", overrides=queued)
    objects, releases = rbac.declared({"type": r.type, "name": r.name, "inputs": r.inputs} for r in deployment.resources)
    found = rbac.rights(objects, "ml-team", releases, dict(DEFAULT_INSTALLS))
    assert {(ns, r.group, r.resources, r.verbs, r.names) for ns, r in found.elsewhere} == {
        ("jobset-system", "apps", ("deployments",), ("get",), ("jobset-controller",)),
        ("kueue-system", "apps", ("deployments",), ("get",), ("kueue-controller-manager",)),
        ("kueue-system", "", ("configmaps",), ("get",), ("kueue-manager-config",))}
    docs = rbac.rbac_documents(found, "gke-finetune-x", [{"kind": "User", "name": "u"}])
    roles = {(d["kind"], d["metadata"]["namespace"]): d for d in docs if d["kind"] in ("Role", "RoleBinding")
             and d["metadata"]["namespace"] != "ml-team"}
    assert set(roles) == {(k, ns) for k in ("Role", "RoleBinding") for ns in ("jobset-system", "kueue-system")}
    assert roles[("Role", "kueue-system")]["metadata"]["name"] == "gke-finetune-x:ml-team"
    assert roles[("RoleBinding", "kueue-system")]["roleRef"]["name"] == "gke-finetune-x:ml-team"
    assert {"group": "", "resource": "configmaps", "verb": "get", "namespace": "kueue-system",
            "name": "kueue-manager-config"} in rbac.access_reviews(found)
    assert rbac.rights(objects, "ml-team", releases).elsewhere == ()


def test_the_handoff_reads_only_the_controllers_a_stack_uses_and_does_not_install(tmp_path):
    _existing_dev_with(tmp_path, "controllers: existing")
    found = handoff("existing-dev", tmp_path).rights
    assert [(ns, r.names) for ns, r in found.elsewhere] == [("jobset-system", ("jobset-controller",))]
    assert handoff("existing-dev", ROOT).rights.elsewhere == ()  # controllers: install


def _existing_dev_with(tmp_path, existing: str):
    """The existing-dev stack file in `tmp_path` with its existingCluster's `controllers: install` replaced."""
    text = (ROOT / "Pulumi.existing-dev.yaml").read_text().replace("controllers: install ", existing)
    (tmp_path / "Pulumi.existing-dev.yaml").write_text(text)
    for program in ("Pulumi.yaml", "__main__.py"):
        (tmp_path / program).write_text((ROOT / program).read_text())


def test_the_handoff_grants_the_reads_of_the_controllers_as_controller_releases_says_they_are_installed(tmp_path):
    """JobSet from its release manifests (kustomize's `jobset-controller-manager`), moved to batch-system: the
    Role is in that namespace and grants that name only; the default release's name is not granted."""
    _existing_dev_with(tmp_path, "controllers: existing\n    controllerReleases: {jobset: 'manifests:batch-system'}")
    found = handoff("existing-dev", tmp_path)
    assert [(ns, r.resources, r.names) for ns, r in found.rights.elsewhere] == [
        ("batch-system", ("deployments",), ("jobset-controller-manager",))]
    roles = [d for d in found.rbac if d["kind"] == "Role" and d["metadata"]["namespace"] == "batch-system"]
    assert [r["rules"] for r in roles] == [[{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"],
                                             "resourceNames": ["jobset-controller-manager"]}]]


def test_a_renamed_kueue_release_is_granted_under_its_chart_s_names():
    installs = {"kueue": ControllerInstall("platform", "queues")}
    assert {(ns, r.names) for ns, r in rbac.controller_reads(installs)} == {
        ("platform", ("queues-kueue-controller-manager",)), ("platform", ("queues-kueue-manager-config",))}


def test_a_ladder_s_controller_role_is_granted_to_the_deployer_who_creates_it():
    """RBAC lets only a user who holds a Role's rights create it and bind it: the ladder controller's
    (manifests/ladder.py) are in the deployer's Role."""
    found = _rights(ladder_overrides(ROOT))
    held = {(r.group, res, v) for r in found.namespaced for res in r.resources for v in r.verbs}
    assert {("jobset.x-k8s.io", "jobsets", "patch"), ("kueue.x-k8s.io", "workloads", "list"),
            ("", "events", "create")} <= held
    written = _rules(found.namespaced)
    for kind in (("rbac.authorization.k8s.io", "roles"), ("rbac.authorization.k8s.io", "rolebindings"),
                 ("apps", "deployments"), ("", "configmaps")):
        assert written[kind].verbs == (*WRITE, *WATCH), kind
    assert "escalate" not in {v for _, _, v in held} and "bind" not in {v for _, _, v in held}
    without = {(r.group, res, v) for r in _rights().namespaced for res in r.resources for v in r.verbs}
    assert ("kueue.x-k8s.io", "workloads", "list") not in without
