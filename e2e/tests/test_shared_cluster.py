"""One cluster shared by two teams' stacks, through the real Pulumi CLI against the control plane.

The platform team's part is the harness's, made beforehand as a platform team
would: the nodes of one TPU pool, the JobSet and Kueue controllers (Kueue
managing both teams' namespaces) and the two namespaces. Each team's stack is
an existing-cluster stack in its own namespace (`controllers: existing`), its
run through Kueue (a priority). Shown here:

- both stacks deploy side by side, each with its part of the pool (`quota`):
  their cluster-scoped objects are named after their namespaces but for the
  pool's one flavor, both runs are admitted (each by its own ClusterQueue, in
  one cohort) and their pods bound;
- `destroy` of one leaves every object of the other, the shared flavor too,
  and both namespaces;
- a changed endpoint of the same cluster (the kubeconfig's server address)
  replaces nothing: the provider is identified by the cluster;
- a stack that would install the controllers someone else installed, deploy
  into a namespace that doesn't exist, or hold more of the pool than the other
  team's queue leaves, is refused by `pulumi preview` before anything is
  declared, with the stack's own one-line problem.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from core.names import SHARED_PREFIX, stack_label_value
from e2e.harness.engine import Engine, engine, existing_cluster_config
from e2e.harness.install import install_stack
from e2e.harness.kube import wait_for
from e2e.harness.observe import KUEUE, admissions, wait_bound
from e2e.harness.session import control_plane
from e2e.harness.stack_objects import Applied, StackObjects, stack_objects
from e2e.harness.tools import ROOT
from e2e.tests.settings import LIFETIME
from e2e.tests.reports import Report
from manifests.controllers import kueue_manager_config

BASE = "dev"
TEAMS = ("team-a", "team-b")
TIMEOUT = 180.0
SHARED_REPORT = Report("shared")
JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def _base_overrides() -> dict:
    """The dev stack's pool with room for both teams' runs, its run through Kueue (a priority)."""
    config = yaml.safe_load((ROOT / f"Pulumi.{BASE}.yaml").read_text())["config"]
    [pool] = config["gke-finetune:pools"]
    [run] = config["gke-finetune:runs"]
    return {"gke-finetune:pools": [{**pool, "autoscaling": {"minNodes": 2, "maxNodes": 2}}],
            "gke-finetune:runs": [{**run, "priority": "normal"}]}


def _platform(objects: StackObjects) -> StackObjects:
    """The platform team's install: the stack's controllers, Kueue managing both teams' namespaces."""
    config = kueue_manager_config(TEAMS[0])
    config["managedJobsNamespaceSelector"] = {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(TEAMS)}]}
    steps = []
    for step in objects.steps:
        if step.release is not None and step.release.get("name") == "kueue":
            values = {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(config, sort_keys=False)}}
            step = Applied(step.name, release={**step.release, "values": values}, after=step.after)
        steps.append(step)
    return StackObjects(objects.stack, objects.cluster, objects.region, objects.autopilot, objects.config,
                        objects.node_pools, steps, objects.runs_namespace)


def _team_config(team: str, kubeconfig: str, **existing) -> dict:
    config = existing_cluster_config(BASE, kubeconfig, namespace=team, create_namespace=False)
    [run] = config["gke-finetune:runs"]
    [dataset] = config["gke-finetune:datasets"]
    # Each team's own run and dataset: their prefixes of the shared bucket are the team's own.
    config["gke-finetune:runs"] = [{**run, "name": f"{team}-run", "priority": "normal", "data": f"{team}-stories"}]
    config["gke-finetune:datasets"] = [{**dataset, "name": f"{team}-stories"}]
    config["gke-finetune:pools"][0]["autoscaling"] = {"minNodes": 2, "maxNodes": 2}
    # Each team's part of the two-node pool: together the pool (more is refused at preview), one flavor, one cohort.
    config["gke-finetune:pools"][0]["quota"] = {"chips": 1}
    config["gke-finetune:existingCluster"].update(existing)
    return config


def _objects_of(kube, team: str) -> list[str]:
    """Everything of a team's stack in the cluster: its namespaced objects and its cluster-scoped ones."""
    found = [f"Namespace/{team}"] if kube.find("v1", "Namespace", team) else []
    for api, kind in (("v1", "ServiceAccount"), ("batch/v1", "Job"), (JOBSET_API, "JobSet"), (KUEUE, "LocalQueue"),
                      (KUEUE, "Workload")):
        found += [f"{kind}/{team}/{o['metadata']['name']}" for o in kube.list(api, kind, team)
                  if kind != "ServiceAccount" or o["metadata"]["name"] != "default"]
    for kind in ("ClusterQueue", "ResourceFlavor", "WorkloadPriorityClass"):
        found += [f"{kind}/{o['metadata']['name']}" for o in kube.list(KUEUE, kind)
                  if o["metadata"]["name"] == team or o["metadata"]["name"].startswith(f"{team}-")]
    return sorted(found)


def _shared_flavor(kube) -> str | None:
    """The pool's one flavor both teams' queues name (docs/capacity.md, "Shared pools")."""
    names = [o["metadata"]["name"] for o in kube.list(KUEUE, "ResourceFlavor")
             if o["metadata"]["name"].startswith(SHARED_PREFIX) and o.get("spec", {}).get("nodeLabels")]
    return names[0] if len(names) == 1 else None


@pytest.fixture(scope="module")
def shared(state_root):
    objects = stack_objects(BASE, overrides_json=json.dumps(_base_overrides()))
    with control_plane(state_root / "shared", LIFETIME) as cp:
        kube = cp.client()
        install_stack(cp, kube, _platform(objects), platform_only=True)
        for team in TEAMS:  # made beforehand, with the platform team's own label
            kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": team, "labels": {"team": team}}})
        stacks = {}
        for team in TEAMS:
            made = engine(cp.tools, state_root / "shared" / team, team, cp.kubeconfig)
            made.write_stack(_team_config(team, str(cp.kubeconfig)))
            stacks[team] = made
        yield cp, kube, stacks


def test_two_teams_stacks_share_a_cluster_and_destroy_leaves_the_other_untouched(shared):
    cp, kube, stacks = shared
    for made in stacks.values():
        made.run("up", "--yes")
    for team, made in stacks.items():
        jobset = kube.get(JOBSET_API, "JobSet", f"{team}-run", team)
        assert wait_bound(kube, jobset, TIMEOUT), team

        def admitted(team=team):
            found = [a for a in admissions(kube, team) if a.owner == f"{team}-run"]
            return found if found and found[0].admitted else None

        [admission] = wait_for(f"{team}'s run admitted", admitted, TIMEOUT, explain=lambda: str(admissions(kube, team)))
        assert set(admission.flavors.values()) == {_shared_flavor(kube)}, admission
        assert kube.get(KUEUE, "ClusterQueue", team)["spec"]["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": team}}
    before = {team: _objects_of(kube, team) for team in TEAMS}
    SHARED_REPORT.append("== two teams' stacks in one cluster, both runs admitted and bound:")
    SHARED_REPORT.extend(f"  {team}: {', '.join(objects)}" for team, objects in before.items())

    stacks["team-a"].run("destroy", "--yes")
    left = _objects_of(kube, "team-a")
    # The platform team's namespace stays, with the label only it set; Kueue's Workload goes with its JobSet.
    assert [o for o in left if not o.startswith("Workload/")] == ["Namespace/team-a"], left
    assert kube.get("v1", "Namespace", "team-a")["metadata"]["labels"]["team"] == "team-a"
    assert _objects_of(kube, "team-b") == before["team-b"]
    assert _shared_flavor(kube), "the pool's flavor, which team-b's queue names, outlives team-a's destroy"
    jobset = kube.get(JOBSET_API, "JobSet", "team-b-run", "team-b")
    assert wait_bound(kube, jobset, TIMEOUT) and not jobset["metadata"].get("deletionTimestamp")
    SHARED_REPORT.append(f"== after destroy of team-a: team-a has {left}; team-b has all {len(before['team-b'])} "
                         "of its objects, its run still bound")


def test_a_changed_endpoint_of_the_same_cluster_replaces_nothing(shared):
    cp, kube, stacks = shared
    made: Engine = stacks["team-b"]
    kubeconfig = yaml.safe_load(cp.kubeconfig.read_text())
    moved = copy.deepcopy(kubeconfig)
    # The same API server at another address (its certificate names both): as a cluster whose endpoint
    # changes, the DNS-based one switched on or its IP rotated.
    moved["clusters"][0]["cluster"]["server"] = cp.server.replace("127.0.0.1", "localhost")
    assert moved != kubeconfig
    elsewhere = cp.state / "kubeconfig-moved"
    elsewhere.write_text(json.dumps(moved))
    config = made.read_stack()
    config["gke-finetune:existingCluster"]["kubeconfig"] = str(elsewhere)
    made.write_stack(config)
    steps = made.preview_steps()
    changed = [(s["op"], s["type"], s["name"]) for s in steps if s["op"] not in ("same", "update")]
    assert changed == [], changed
    assert not [s for s in steps if s["op"] == "update" and not s["type"].startswith("pulumi:providers:")], steps
    SHARED_REPORT.append(f"== team-b's kubeconfig moved to {moved['clusters'][0]['cluster']['server']}: preview "
                         f"replaces nothing ({sorted({s['op'] for s in steps})})")


@pytest.mark.parametrize("case, change, expected", [
    ("controllers someone else installed", {"controllers": "install"},
     "existingCluster.controllers: 'install' but jobset is installed in this cluster already, by someone else"),
    ("a namespace that doesn't exist", {"namespace": "team-c"},
     "namespace: 'team-c' does not exist in this cluster; allowed: a namespace the platform team made"),
    ("a namespace another stack would lose", {"createNamespace": True},
     "createNamespace: true but namespace 'team-b' exists already in this cluster"),
    ("a share that overcommits the pool", {"namespace": "team-a", "quota": 2},
     "pools[0].quota.chips: 2 of pool 'v6e-1x1' (2 chips), and the cluster's other queues on it hold"),
])
def test_a_stack_that_would_take_over_the_clusters_singletons_is_refused_at_preview(shared, state_root, case,
                                                                                     change, expected):
    cp, kube, _ = shared
    made = engine(cp.tools, state_root / "shared" / case.replace(" ", "-").replace("'", ""), "team-b-copy",
                  cp.kubeconfig)
    config = _team_config("team-b", str(cp.kubeconfig), **{k: v for k, v in change.items() if k == "controllers"})
    for key in ("namespace", "createNamespace"):
        if key in change:
            config[f"gke-finetune:{key}"] = change[key]
    if "quota" in change:  # the whole pool, where team-b's queue holds a part: read from the cluster's queues
        config["gke-finetune:pools"][0]["quota"] = {"chips": change["quota"]}
    made.write_stack(config)
    step = made.run("preview", check=False)
    assert step.returncode != 0 and expected in step.output, step.output[-3000:]
    assert kube.get("v1", "Namespace", "team-b")["metadata"]["labels"].get("gke-finetune/stack") \
        != stack_label_value("team-b-copy")
    SHARED_REPORT.append(f"== {case}: pulumi preview exited {step.returncode}: "
                         + next(line.strip() for line in step.output.splitlines() if expected in line)[:400])
