"""One cluster shared by two teams' stacks, through the real Pulumi CLI against the control plane.

The platform team's part is the harness's, made beforehand: the nodes of one
TPU pool and the two teams' namespaces. Team A's stack installs the JobSet and
Kueue controllers (`controllers: install`, its Kueue managing team B's
namespace too: `kueue.managedNamespaces`); team B's stack, in its own
namespace, uses them (`controllers: existing`). Each stack's run goes through
Kueue (a priority). Shown here:

- team A's `pulumi up` installs both controllers as Helm releases through the
  engine's Helm (`charts: {dir: ...}`: the charts rendered with the release's
  values, their webhooks called by url, e2e/harness/controllers.py
  `chart_for_engine`);
- both stacks deploy side by side, each with its part of the pool (`quota`):
  their cluster-scoped objects are named after their namespaces but for the
  pool's one flavor, both runs are admitted (each by its own ClusterQueue, in
  one cohort) and their pods bound;
- team A's `destroy` removes team A's own objects and leaves the controllers
  (Deployments, webhooks), every CRD of JobSet and Kueue, and every object of
  team B: its JobSet, LocalQueue, ClusterQueue and Workload, its run still
  admitted and bound, and the pool's shared flavor its queue names;
- last, team B gone: a stack deployed when cluster-scoped names had no hash (its
  ResourceFlavor `<namespace>-<pool>`, state included) is previewed with the current program:
  the real engine shows exactly the objects `make plan` lists as renamed, each
  replaced (the Pulumi aliases carry it over), the ClusterQueue updated in place,
  and `up` leaves the new names only;
- a changed endpoint of the same cluster (the kubeconfig's server address)
  replaces nothing: the provider is identified by the cluster;
- a stack that would install the controllers another stack installed, deploy
  into a namespace that doesn't exist, or hold more of the pool than the other
  team's queue leaves, is refused by `pulumi preview` before anything is
  declared, with the stack's own one-line problem.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from core.names import SHARED_PREFIX, cluster_scoped, legacy_cluster_scoped, stack_label_value
from e2e.harness.controllers import chart_for_engine, start_manager
from e2e.harness.engine import Engine, copy_program, engine, existing_cluster_config
from e2e.harness.install import install_stack
from e2e.harness.kube import wait_for
from e2e.harness.observe import KUEUE, admissions, wait_bound
from e2e.harness.session import control_plane
from e2e.harness.stack_objects import RELEASE_TYPE, StackObjects, declared_releases, stack_objects
from e2e.harness.tools import ROOT
from e2e.tests.settings import LIFETIME
from e2e.tests.reports import Report
from tools.plan.collect import collect

BASE = "dev"
TEAMS = ("team-a", "team-b")
INSTALLER = "team-a"  # the team whose stack installs the controllers
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


def _nodes_only(objects: StackObjects) -> StackObjects:
    """The platform team's part: the nodes (install_stack, platform_only); the controllers are team A's."""
    return dataclasses.replace(objects, steps=[s for s in objects.steps if s.release is None])


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


def _with_what_they_need(steps: list[dict], urns: list[str]) -> set[str]:
    """The URNs and, transitively, their parents, providers and dependencies: what a targeted `up` of them
    creates with them."""
    states = {s["urn"]: s.get("newState") or {} for s in steps}
    found: set[str] = set()
    pending = list(urns)
    while pending:
        urn = pending.pop()
        if urn in found or urn not in states:
            continue
        found.add(urn)
        state = states[urn]
        pending += [state.get("parent") or "", (state.get("provider") or "").rsplit("::", 1)[0],
                    *(state.get("dependencies") or [])]
    assert sum(u.split("::")[-2].endswith(RELEASE_TYPE) for u in found) == 2, sorted(found)
    return found


def _install_controllers(cp, kube, made: Engine) -> dict[str, float]:
    """Team A's controllers, installed by its own stack through the engine: its two Helm releases first
    (`up --target`), their managers started as the harness runs them (a kubelet would start the containers),
    then the rest of the stack. The releases' charts are rendered with the values the program declares."""
    releases = declared_releases(made.stack, made.workdir)
    assert sorted(r["name"] for r in releases) == ["jobset", "kueue"], releases
    charts = Path(made.read_stack()["gke-finetune:charts"]["dir"])
    local = [chart_for_engine(cp, release, charts) for release in releases]
    planned = json.loads(made.run("preview", "--json").stdout)["steps"]
    targets = _with_what_they_need(planned, [s["urn"] for s in planned if s["urn"].split("::")[-2].endswith(
        RELEASE_TYPE)])
    releases_up = made.run("up", "--yes", *(a for urn in sorted(targets) for a in ("--target", urn)))
    for installed in local:
        start_manager(cp, kube, installed)
    return {"releases": releases_up.seconds}


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
        install_stack(cp, kube, _nodes_only(objects), platform_only=True)
        for team in TEAMS:  # made beforehand, with the platform team's own label
            kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": team, "labels": {"team": team}}})
        stacks = {}
        for team in TEAMS:
            made = engine(cp.tools, state_root / "shared" / team, team, cp.kubeconfig)
            config = _team_config(team, str(cp.kubeconfig))
            if team == INSTALLER:
                config = {**_team_config(team, str(cp.kubeconfig), controllers="install"),
                          "gke-finetune:charts": {"dir": str(state_root / "shared" / "charts")},
                          "gke-finetune:kueue": {"managedNamespaces": [t for t in TEAMS if t != team]}}
            made.write_stack(config)
            stacks[team] = made
        timings = _install_controllers(cp, kube, stacks[INSTALLER])
        SHARED_REPORT.append(f"== {INSTALLER}'s stack installs JobSet and Kueue through the engine's Helm: "
                             f"up --target of the two releases {timings['releases']:.1f} s")
        yield cp, kube, stacks


def _admitted(kube, team: str) -> list:
    def admitted():
        found = [a for a in admissions(kube, team) if a.owner == f"{team}-run"]
        return found if found and found[0].admitted else None

    return wait_for(f"{team}'s run admitted", admitted, TIMEOUT, explain=lambda: str(admissions(kube, team)))


def _controllers(kube) -> dict[str, list[str]]:
    """What the installed controllers are in the cluster: their CRDs, Deployments and webhook configurations."""
    crds = [c["metadata"]["name"] for c in kube.list("apiextensions.k8s.io/v1", "CustomResourceDefinition")
            if c["spec"]["group"] in ("jobset.x-k8s.io", "kueue.x-k8s.io")]
    deployments = [f"{ns}/{d['metadata']['name']}" for ns in ("jobset-system", "kueue-system")
                   for d in kube.list("apps/v1", "Deployment", ns)]
    webhooks = [w["metadata"]["name"] for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
                for w in kube.list("admissionregistration.k8s.io/v1", kind)]
    return {"crds": sorted(crds), "deployments": sorted(deployments), "webhooks": sorted(webhooks)}


def test_team_a_installs_the_controllers_team_b_uses_them_and_team_a_s_destroy_leaves_team_b_whole(shared):
    cp, kube, stacks = shared
    for made in stacks.values():
        made.run("up", "--yes")
    for team, made in stacks.items():
        jobset = kube.get(JOBSET_API, "JobSet", f"{team}-run", team)
        assert wait_bound(kube, jobset, TIMEOUT), team
        [admission] = _admitted(kube, team)
        assert set(admission.flavors.values()) == {_shared_flavor(kube)}, admission
        assert kube.get(KUEUE, "ClusterQueue", team)["spec"]["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": team}}
    installed = _controllers(kube)
    assert "jobsets.jobset.x-k8s.io" in installed["crds"] and {"clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io",
                                                               "workloads.kueue.x-k8s.io"} <= set(installed["crds"])
    assert installed["deployments"] == ["jobset-system/jobset-controller", "kueue-system/kueue-controller-manager"]
    before = {team: _objects_of(kube, team) for team in TEAMS}
    SHARED_REPORT.append(f"== {INSTALLER}'s stack installed {len(installed['crds'])} CRDs, "
                         f"{', '.join(installed['deployments'])}; both runs admitted and bound:")
    SHARED_REPORT.extend(f"  {team}: {', '.join(objects)}" for team, objects in before.items())

    destroyed = stacks[INSTALLER].run("destroy", "--yes")
    left = _objects_of(kube, INSTALLER)
    # The platform team's namespace stays, with the label only it set; Kueue's Workload goes with its JobSet.
    assert [o for o in left if not o.startswith("Workload/")] == [f"Namespace/{INSTALLER}"], left
    assert kube.get("v1", "Namespace", INSTALLER)["metadata"]["labels"]["team"] == INSTALLER
    # The controllers and every CRD stay (the releases are retained on delete), and so does team B, whole.
    assert _controllers(kube) == installed
    assert _objects_of(kube, "team-b") == before["team-b"]
    jobset = kube.get(JOBSET_API, "JobSet", "team-b-run", "team-b")
    assert wait_bound(kube, jobset, TIMEOUT) and not jobset["metadata"].get("deletionTimestamp")
    assert _shared_flavor(kube), "the pool's flavor, which team-b's queue names, outlives team-a's destroy"
    [admission] = _admitted(kube, "team-b")
    assert set(admission.flavors.values()) == {_shared_flavor(kube)}, admission
    SHARED_REPORT.append(f"== after {INSTALLER}'s destroy ({destroyed.seconds:.1f} s): {INSTALLER} has {left}; the "
                         f"controllers and all {len(installed['crds'])} CRDs stay; team-b has all "
                         f"{len(before['team-b'])} of its objects, its run still admitted and bound")


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
    ("controllers another stack installed", {"controllers": "install"},
     "existingCluster.controllers: 'install' but jobset is installed in this cluster already, by the gke-finetune "
     "stack 'team-a' of namespace 'team-a'"),
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


# What the program names cluster-scoped objects as before they had a hash (core/names.py
# `legacy_cluster_scoped`), and no aliases: the program as it was, appended to its copy's modules.
LEGACY_NAMES = {
    "core/names.py": "\n\ndef cluster_scoped(namespace, name=''):\n"
                     "    return legacy_cluster_scoped(namespace, name) if name else namespace\n",
    "manifests/kueue.py": "\n\ndef renamed_from(flavors):\n    return {}\n",
}


def _replaced(steps: list[dict]) -> dict[str, set[str]]:
    """The engine's planned steps by op, replacements as one op."""
    ops: dict[str, set[str]] = {}
    for s in steps:
        op = "replace" if s["op"] in ("replace", "create-replacement", "delete-replaced") else s["op"]
        ops.setdefault(op, set()).add(f"{s['type'].rsplit(':', 1)[-1]} {s['name']}")
    return ops


def _applied_order(stream: str) -> list[tuple[str, str]]:
    """(op, kind) of each step the engine began, in its order, from `pulumi up --json`'s stream of engine events
    (github.com/pulumi/pulumi #8275; sdk/go/common/apitype/events.go: a step's start is a `resourcePreEvent`),
    same steps and providers left out. The events follow each other as JSON values, decoded one after another."""
    decoder, order, at = json.JSONDecoder(), [], 0
    while (at := _skip_space(stream, at)) < len(stream):
        event, at = decoder.raw_decode(stream, at)
        metadata = ((event or {}).get("resourcePreEvent") or {}).get("metadata") or {}
        if metadata and metadata.get("op") != "same" and not metadata.get("type", "").startswith("pulumi:"):
            order.append((metadata["op"], metadata["type"].rsplit(":", 1)[-1]))
    return order


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def test_objects_deployed_under_the_names_before_the_hash_are_replaced_as_the_plan_says(shared):
    """Last, team B gone: team A's stack again (its controllers now `existing`, as a destroyed installer finds them), first deployed
    by the program as it named cluster-scoped objects before the hash, then previewed and applied with the
    current one. The real engine follows the aliases: each object `make plan` lists as renamed is one replace
    (the new object created first, the old one deleted last), the ClusterQueue that names it updated in place,
    nothing else changes, and afterwards only the new names exist."""
    cp, kube, stacks = shared
    # Before shares a stack held its whole pool: team B, holding its part, goes first (the preview would
    # refuse the overcommit), and the stack has no quota (a share's flavor is the pool's, never renamed).
    stacks["team-b"].run("destroy", "--yes")
    made = stacks[INSTALLER]
    config = _team_config(INSTALLER, str(cp.kubeconfig))
    del config["gke-finetune:pools"][0]["quota"]
    made.write_stack(config)
    for module, text in LEGACY_NAMES.items():
        with (made.workdir / module).open("a") as f:
            f.write(text)
    made.run("up", "--yes")
    old_flavor = legacy_cluster_scoped(INSTALLER, "v6e-1x1")
    assert kube.find(KUEUE, "ResourceFlavor", old_flavor), "the legacy program named its flavor without a hash"
    _admitted(kube, INSTALLER)
    copy_program(made.workdir)  # the current program, over the legacy one

    renamed = collect(made.stack, root=made.workdir)["renamed"]
    new_flavor = cluster_scoped(INSTALLER, "v6e-1x1")
    assert renamed == [f"resourceflavor {old_flavor} -> {new_flavor}"], renamed
    step = made.run("preview", "--json")
    steps = [{"op": s["op"], "type": s["urn"].split("::")[-2].split("$")[-1], "name": s["urn"].split("::")[-1]}
             for s in json.loads(step.stdout).get("steps", [])]
    changes = {op: names for op, names in _replaced(steps).items() if op != "same"}
    assert changes == {"replace": {f"ResourceFlavor kueue-resourceflavor-{new_flavor}"},
                       "update": {f"ClusterQueue kueue-clusterqueue-{INSTALLER}"}}, changes
    up = made.run("up", "--yes", "--json")
    # Create before delete, in the order the engine applied them: the new flavor and the ClusterQueue naming it
    # before the old flavor is deleted.
    order = _applied_order(up.stdout)
    assert {("create-replacement", "ResourceFlavor"), ("delete-replaced", "ResourceFlavor"),
            ("update", "ClusterQueue")} <= set(order), order
    assert order.index(("create-replacement", "ResourceFlavor")) < order.index(("delete-replaced", "ResourceFlavor"))
    assert order.index(("update", "ClusterQueue")) < order.index(("delete-replaced", "ResourceFlavor")), order
    assert kube.find(KUEUE, "ResourceFlavor", new_flavor) and not kube.find(KUEUE, "ResourceFlavor", old_flavor)
    flavors = {f["name"] for group in kube.get(KUEUE, "ClusterQueue", INSTALLER)["spec"]["resourceGroups"]
               for f in group["flavors"]}
    assert flavors == {new_flavor}, flavors
    again = made.preview_steps()
    assert [s for s in again if s["op"] != "same"] == [], again
    SHARED_REPORT.append(f"== {INSTALLER} deployed with the names before the hash, then the current program: make plan "
                         f"lists {renamed}; pulumi preview replaces it and updates the ClusterQueue; up applies "
                         f"{' then '.join(f'{op} {kind}' for op, kind in order)}; "
                         f"up {up.seconds:.1f} s leaves {new_flavor} only; a second preview changes nothing")
