"""`make handoff`'s RBAC is enough for `pulumi up` and `destroy`, and `make doctor` says so, on a real API server.

The platform team's part is the harness's: the a4 stack's nodes, the JobSet
and Kueue controllers (Kueue managing `team-r`), and a namespace `team-r`
enforcing the restricted Pod Security level with a ResourceQuota and a
LimitRange. The team's stack is the shipped a4 stack as an existing-cluster
stack there (`controllers: existing`), its run through Kueue (a priority), so
that it declares cluster-scoped objects too (its ClusterQueue, ResourceFlavor
and priority classes, which the ClusterRole grants by name),
deployed through the real Pulumi CLI by `team-r-deployer`, a user (a client
certificate of the cluster's CA) who holds nothing but what `make handoff`
prints. Shown, in order:

- without the handoff, the deployer's `up` is forbidden (its preview passes:
  the provider previews a forbidden dry run client-side), nothing is created,
  and `make doctor` says every right is missing;
- a quota too small for the run, and a run whose pods the namespace's level
  refuses: the preview refuses each before anything is created, naming the
  quota or the level and who changes it;
- with the handoff's Role, ClusterRole and bindings applied: `make doctor`
  finds every right, `pulumi up` creates the stack and the run's pods are
  bound (restricted namespace, quota), a second preview changes nothing;
- JobSet installed from its release manifests (kustomize's names): the
  preview refuses the default `controllerReleases`, naming `manifests`;
  with it and the handoff applied again, the doctor and the preview's checks
  read its Deployment as the deployer;
- one verb taken out of the Role (`delete` on JobSets) and `destroy` fails on
  it; put back, `destroy` removes everything the stack applied.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import pytest
import yaml
from kubernetes import config as k8s_config

from admission.pod_security import ENFORCE_LABEL, RESTRICTED
from admission.shared_cluster import CHART_LABEL, controller_of
from components import preflight
from e2e.harness.controllers import MANAGER_CONFIG_KEY
from e2e.harness.engine import engine, existing_cluster_config
from e2e.harness.install import install_stack
from e2e.harness.observe import wait_bound
from e2e.harness.session import control_plane
from e2e.harness.stack_objects import Applied, StackObjects, stack_objects
from e2e.harness.tools import ROOT
from manifests.controllers import kueue_manager_config
from e2e.tests.reports import Report
from e2e.tests.settings import LIFETIME
from e2e.tests.test_engine import _left_by_pulumi
from stack.reader import load_files
from tools.doctor.answers import Live
from tools.doctor.cluster_checks import cluster_findings
from tools.plan.handoff import Subjects, handoff

BASE = "a4"
NAMESPACE = "team-r"
DEPLOYER = "team-r-deployer"
STACK = "team-r"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
TIMEOUT = 180.0
ADMISSION_API = "admissionregistration.k8s.io/v1"
MANIFESTS_DEPLOYMENT = "jobset-controller-manager"  # kustomize's name (JobSet v0.12.0 config/default namePrefix)
HANDOFF_REPORT = Report("handoff")


def _platform_namespace(kube, gpus: str) -> None:
    """The platform team's namespace: restricted, a quota on limits and accelerators, a per-container limit."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": NAMESPACE, "labels": {ENFORCE_LABEL: RESTRICTED}}})
    kube.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team", "namespace": NAMESPACE},
                "spec": {"hard": {"limits.cpu": "500", "limits.memory": "8Ti", "requests.nvidia.com/gpu": gpus,
                                  "pods": "10"}}})
    kube.apply({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "team", "namespace": NAMESPACE},
                "spec": {"limits": [{"type": "Container", "max": {"memory": "6Ti", "cpu": "300"}}]}})


# The a4 stack's run through Kueue; its model server (`serve:`) is left out, since a server may not take a
# pool whose capacity Kueue's quota counts (stack/serving.py).
NO_SERVER = {"gke-finetune:serve": None}


def _queued_runs() -> list[dict]:
    """The a4 stack's run, through Kueue (a priority)."""
    runs = yaml.safe_load((ROOT / f"Pulumi.{BASE}.yaml").read_text())["config"]["gke-finetune:runs"]
    return [{**run, "priority": "normal"} for run in runs]


def _platform(objects: StackObjects) -> StackObjects:
    """The platform team's controllers, its Kueue managing the team's namespace."""
    config = yaml.safe_dump(kueue_manager_config(NAMESPACE), sort_keys=False)
    steps = [Applied(s.name, release={**s.release, "values": {"managerConfig": {"controllerManagerConfigYaml": config}}},
                     after=s.after) if s.release is not None and s.release.get("name") == "kueue" else s
             for s in objects.steps]
    return dataclasses.replace(objects, steps=steps)


@pytest.fixture(scope="module")
def handed(state_root):
    shipped = stack_objects(BASE, overrides_json=json.dumps({"gke-finetune:runs": _queued_runs(), **NO_SERVER}))
    with control_plane(state_root / "handoff", LIFETIME) as cp:
        kube = cp.client()
        install_stack(cp, kube, _platform(shipped), platform_only=True)
        _platform_namespace(kube, gpus="8")
        deployer = cp.user_kubeconfig(cp.state / "deployer.kubeconfig", DEPLOYER)
        made = engine(cp.tools, state_root / "handoff" / "pulumi", STACK, deployer)
        config = existing_cluster_config(BASE, str(deployer), namespace=NAMESPACE, create_namespace=False)
        config.pop("gke-finetune:serve", None)
        made.write_stack({**config, "gke-finetune:runs": _queued_runs()})
        yield cp, kube, made


def _doctor(made) -> dict:
    config = load_files(made.stack, made.workdir)
    return {f.check: f for f in cluster_findings(Live(), config, made.workdir)}


def _refusal(step) -> str:
    """The stack's own problem line in the CLI's output."""
    return next((line.strip() for line in step.output.splitlines() if line.strip().startswith("- runs[")), "")[:400]


def test_without_the_handoff_the_deployer_may_do_nothing_and_the_doctor_says_so(handed):
    """The provider's preview passes a forbidden dry run by (it previews the object client-side, and says
    `creation failed: ... forbidden` as a status line only), so a green preview proves no right: `up` fails,
    and `make doctor` says which rights are missing before anyone tries."""
    _, kube, made = handed
    preview = made.run("preview", check=False)
    assert "is forbidden: User \"team-r-deployer\" cannot patch resource" in preview.output, preview.output[-3000:]
    step = made.run("up", "--yes", check=False)
    assert step.returncode != 0 and "forbidden" in step.output, step.output[-3000:]
    assert not _left_by_pulumi(kube)
    rights = _doctor(made)["Kubernetes rights"]
    assert rights.status == "MISS" and rights.detail.split(" of ")[0] == rights.detail.split(" of ")[1].split(" ")[0]
    HANDOFF_REPORT.append(f"== no RBAC: pulumi preview exited {preview.returncode} (the provider previews a forbidden "
                          f"dry run client-side), up exited {step.returncode}, nothing created; make doctor: "
                          f"{rights.detail[:160]}")


def test_the_handoff_rbac_applied_the_doctor_finds_every_right(handed):
    _, kube, made = handed
    found = handoff(STACK, made.workdir, Subjects(users=(DEPLOYER,)))
    for document in found.rbac:
        kube.apply(document)
    [cluster_role] = [d for d in found.rbac if d["kind"] == "ClusterRole"]
    written = {r["resources"][0]: r.get("resourceNames") for r in cluster_role["rules"] if "create" in r["verbs"]}
    assert set(written) == {"clusterqueues", "resourceflavors", "workloadpriorityclasses"} and all(written.values())
    # The preview's reads of the platform team's controllers, granted by name in their namespaces.
    assert {(d["kind"], d["metadata"]["namespace"]) for d in found.rbac if d["kind"] == "Role"} == {
        ("Role", NAMESPACE), ("Role", "jobset-system"), ("Role", "kueue-system")}
    doctor = _doctor(made)
    assert {c: f.status for c, f in doctor.items()} == {
        "cluster": "ok", "namespace": "ok", "Kubernetes rights": "ok", "controller jobset": "ok",
        "controller kueue": "ok", "namespace policy": "ok"}, doctor
    # Each controller's Deployment read by name with the handoff's rights (the chart's staging image tags name
    # no version here).
    assert "in jobset-system" in doctor["controller jobset"].detail, doctor["controller jobset"]
    assert "in kueue-system" in doctor["controller kueue"].detail, doctor["controller kueue"]
    assert not [f for f in doctor.values() if "not checked" in f.detail], doctor
    HANDOFF_REPORT.append(f"== {len(found.rbac)} RBAC objects applied ({sum(len(d.get('rules', [])) for d in found.rbac)} "
                          f"rules); make doctor: {doctor['Kubernetes rights'].detail}")


def test_with_the_handoff_alone_the_preview_checks_the_installed_kueue_s_configuration(handed):
    """The deployer's preview reads the controllers' Deployments and Kueue's manager ConfigMap with the
    handoff's `get` by name: nothing about them is "not checked", and a configuration that stops managing the
    namespace is refused, naming the ConfigMap (the platform team's edit, undone after)."""
    _, kube, made = handed
    step = made.run("preview")
    unchecked = [line.strip() for line in step.output.splitlines() if "not checked" in line
                 and any(w in line for w in ("Kueue", "kueue", "jobset", "controllers"))]
    assert unchecked == [], unchecked
    config_map = kube.get("v1", "ConfigMap", "kueue-manager-config", "kueue-system")
    shipped = config_map["data"][MANAGER_CONFIG_KEY]
    narrowed = yaml.safe_load(shipped)
    narrowed["managedJobsNamespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": "another-team"}}
    patch = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kueue-manager-config",
                                                                   "namespace": "kueue-system"}}
    kube.apply({**patch, "data": {MANAGER_CONFIG_KEY: yaml.safe_dump(narrowed)}})
    try:
        refused = made.run("preview", check=False)
    finally:
        kube.apply({**patch, "data": {MANAGER_CONFIG_KEY: shipped}})
    expected = (f"the installed Kueue (ConfigMap kueue-system/kueue-manager-config) does not manage namespace "
                f"'{NAMESPACE}'")
    assert refused.returncode != 0 and expected in refused.output, refused.output[-3000:]
    HANDOFF_REPORT.append(f"== as {DEPLOYER} with the handoff: preview checks Kueue's configuration (no 'not "
                          f"checked'); a Kueue not managing {NAMESPACE}: preview exited {refused.returncode}: "
                          + next(line.strip() for line in refused.output.splitlines() if expected in line)[:300])


def _as_release_manifests(kube) -> Callable[[], None]:
    """The platform team's JobSet as its release manifests install it (`kubectl apply -f manifests.yaml`):
    webhook configurations without the chart's label, and the manager's Deployment under kustomize's name
    `jobset-controller-manager` (a copy of the chart's, no replicas). Returns what puts the chart's install
    back."""
    labels = {c["metadata"]["name"]: (kind, c["metadata"]["labels"][CHART_LABEL])
              for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
              for c in kube.list(ADMISSION_API, kind)
              if controller_of(c) == "jobset" and CHART_LABEL in (c["metadata"].get("labels") or {})}
    assert labels, "the chart's JobSet webhook configurations carry its helm.sh/chart label"
    for name, (kind, _) in labels.items():
        kube.patch(ADMISSION_API, kind, name, None, {"metadata": {"labels": {CHART_LABEL: None}}})
    chart = kube.get("apps/v1", "Deployment", "jobset-controller", "jobset-system")
    copy = {"e2e/install": "manifests"}
    spec = {**chart["spec"], "replicas": 0,
            "selector": {"matchLabels": {**chart["spec"]["selector"]["matchLabels"], **copy}},
            "template": {**chart["spec"]["template"], "metadata": {
                "labels": {**chart["spec"]["template"]["metadata"]["labels"], **copy}}}}
    kube.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": MANIFESTS_DEPLOYMENT, "namespace": "jobset-system"}, "spec": spec})

    def restore() -> None:
        kube.delete("apps/v1", "Deployment", MANIFESTS_DEPLOYMENT, "jobset-system")
        for name, (kind, value) in labels.items():
            kube.patch(ADMISSION_API, kind, name, None, {"metadata": {"labels": {CHART_LABEL: value}}})
    return restore


def _apply_handoff(kube, made) -> None:
    for document in handoff(STACK, made.workdir, Subjects(users=(DEPLOYER,))).rbac:
        kube.apply(document)


def test_a_jobset_from_its_release_manifests_is_read_under_their_names_once_the_stack_says_so(handed):
    """JobSet installed from its release manifests: its Deployment is kustomize's `jobset-controller-manager`,
    which the handoff for the default Helm release doesn't grant. The deployer's preview finds the install on
    the cluster, reads that Deployment (403 with the handoff's Role) and is refused, naming
    `controllerReleases.jobset` and the value to set; with `manifests` set and the handoff applied again, the
    doctor and the preview's checks read it as the deployer, every right granted, nothing "not checked"."""
    cp, kube, made = handed
    config = made.read_stack()
    restore = _as_release_manifests(kube)
    try:
        refused = made.run("preview", check=False)
        expected = ("existingCluster.controllerReleases.jobset: 'jobset-system/jobset' but jobset is installed from "
                    "its release manifests in namespace 'jobset-system'")
        assert refused.returncode != 0 and expected in refused.output, refused.output[-3000:]
        assert "allowed: manifests; then the platform team applies the RBAC of `make handoff STACK=team-r`" \
            in refused.output, refused.output[-3000:]
        forbidden = f"Deployment jobset-system/{MANIFESTS_DEPLOYMENT}) (403"
        assert forbidden in refused.output, refused.output[-3000:]
        existing = {**config["gke-finetune:existingCluster"], "controllerReleases": {"jobset": "manifests"}}
        made.write_stack({**config, "gke-finetune:existingCluster": existing})
        _apply_handoff(kube, made)
        doctor = _doctor(made)
        assert (doctor["controller jobset"].status, doctor["Kubernetes rights"].status) == ("ok", "ok"), doctor
        api = preflight.api_client(k8s_config.load_kube_config, config_file=str(cp.state / "deployer.kubeconfig"),
                                   context="e2e")
        problems, not_checked = preflight.cluster_problems(load_files(made.stack, made.workdir), api)
        assert problems == [] and not_checked == [], (problems, not_checked)
    finally:
        restore()
        made.write_stack(config)
        _apply_handoff(kube, made)
    HANDOFF_REPORT.append(f"== JobSet from its release manifests, controllerReleases at its default: preview exited "
                          f"{refused.returncode}: {expected}; with `manifests` and the handoff again: make doctor "
                          f"{doctor['controller jobset'].detail}, the preview's checks: nothing refused, nothing "
                          "not checked")


def test_a_quota_too_small_and_a_level_too_strict_are_refused_at_preview_before_anything_is_created(handed):
    _, kube, made = handed
    config = made.read_stack()
    _platform_namespace(kube, gpus="4")
    step = made.run("preview", check=False)
    assert step.returncode != 0 and "ResourceQuota 'team' of namespace 'team-r' allows (4)" in step.output, \
        step.output[-3000:]
    assert "the platform team raises the quota's spec.hard.requests.nvidia.com/gpu to at least 8" in step.output
    HANDOFF_REPORT.append(f"== quota of 4 GPUs: preview exited {step.returncode}: {_refusal(step)}")
    _platform_namespace(kube, gpus="8")
    root = {"name": "as-root", "pool": config["gke-finetune:runs"][0]["pool"], "runAs": {"user": 0, "group": 0},
            "image": f"us-docker.pkg.dev/e2e/team/own@sha256:{'e3' * 32}", "command": ["python", "-m", "team.train"]}
    made.write_stack({**config, "gke-finetune:runs": [*config["gke-finetune:runs"], root]})
    step = made.run("preview", check=False)
    assert step.returncode != 0 and "needs Pod Security level 'baseline'" in step.output, step.output[-3000:]
    assert f"kubectl label namespace {NAMESPACE} {ENFORCE_LABEL}=baseline" in step.output
    HANDOFF_REPORT.append(f"== a root container in a restricted namespace: preview exited {step.returncode}: "
                          f"{_refusal(step)}")
    made.write_stack(config)
    assert not _left_by_pulumi(kube)


def test_up_and_destroy_succeed_with_the_handoff_alone_and_fail_without_one_of_its_verbs(handed):
    _, kube, made = handed
    up = made.run("up", "--yes")
    jobset = kube.get(JOBSET_API, "JobSet", "gemma4-sql", NAMESPACE)
    assert wait_bound(kube, jobset, TIMEOUT)
    again = made.preview_steps()  # the ClusterQueue's quotas as the API server keeps them (manifests/kueue.py)
    assert [s for s in again if s["op"] != "same"] == [], again
    role = kube.get("rbac.authorization.k8s.io/v1", "Role", f"gke-finetune-{STACK}", NAMESPACE)
    full = [dict(r) for r in role["rules"]]
    role["rules"] = [{**r, "verbs": [v for v in r["verbs"] if v != "delete"]} if r["resources"] == ["jobsets"] else r
                     for r in full]
    kube.apply({k: role[k] for k in ("apiVersion", "kind", "rules")} | {"metadata": {
        "name": role["metadata"]["name"], "namespace": NAMESPACE}})
    failed = made.run("destroy", "--yes", check=False)
    assert failed.returncode != 0 and "forbidden" in failed.output and "jobsets" in failed.output, failed.output[-3000:]
    kube.apply({k: role[k] for k in ("apiVersion", "kind")} | {"rules": full, "metadata": {
        "name": role["metadata"]["name"], "namespace": NAMESPACE}})
    done = made.run("destroy", "--yes")
    assert _left_by_pulumi(kube) == []
    HANDOFF_REPORT.append(f"== as {DEPLOYER}, with the handoff alone: up {up.seconds:.1f} s (pods bound in a "
                          f"restricted namespace with a quota), preview: no change; without `delete` on jobsets "
                          f"destroy exited {failed.returncode}; with it destroy {done.seconds:.1f} s, nothing left")
