"""Runs under faults, through the real controllers: a program of the control plane killed and started again,
Spot VMs taken back, a higher-priority run, a node gone NotReady (e2e/harness/faults.py plays each).

On a control plane of their own (faults_plane.py): a multislice run (two Spot slices) and the
laddered Kueue run hold their pods throughout; a second ladder run holds the on-demand rung, so a
third waits on the queued rung for its ProvisioningRequest: "being admitted". `make status` is
read before and after each fault.
"""

from __future__ import annotations

import time

import pytest

from core.catalog import NODEPOOL_LABEL, TPU_TOPOLOGY_LABEL
from e2e.harness import faults
from e2e.harness.kube import wait_for
from e2e.harness.observe import admissions
from e2e.harness.session import control_plane
from e2e.tests import faults_plane as fp
from e2e.tests.faults_plane import ADMITTING, LADDER, MULTISLICE, SECOND, URGENT, FaultsPlane
from e2e.tests.reports import Report
from e2e.tests.settings import LIFETIME
from stack.contracts import node_pool_names

STEADY = (LADDER, MULTISLICE, SECOND)
FAULT_REPORT = Report("faults")
# How long the work meant for a stopped program piles up before it is started again.
DOWN_SECONDS = 2.0
# The node lifecycle controller reads the nodes' reported health every --node-monitor-period (5 s by
# default: k8s.io/cloud-provider v0.35.4 config/v1alpha1/defaults.go; its monitorNodeHealth loop,
# k8s.io/kubernetes v1.35.4 pkg/controller/nodelifecycle/node_lifecycle_controller.go) and taints a node
# whose kubelet reports NotReady at the next look. Looking every second finds the NotReady node sooner;
# what it then does (the taints, the evictions by toleration) is the same.
CONTROLLER_MANAGER_ARGS = ["--node-monitor-period=1s"]


@pytest.fixture(scope="module")
def plane(state_root):
    with control_plane(state_root / "faults", LIFETIME,
                       extra_args={"kube-controller-manager": CONTROLLER_MANAGER_ARGS}) as cp:
        yield fp.build(cp, state_root / "faults")


@pytest.fixture(scope="module")
def steady(plane: FaultsPlane):
    """The multislice run and two ladder runs (Spot and on-demand rungs), every pod Running."""
    for run in STEADY:
        plane.submit(run)
        fp.wait_running(plane, run)
    return {run: fp.uids(fp.running(plane, run)) for run in STEADY}


def test_each_slice_of_a_16_slice_run_holds_one_node_pool_of_its_own(plane, steady):
    """JobSet's exclusive placement through the real scheduler: every slice's pods on one node pool
    of the pool's topology, no node pool holding two slices, every node pool of the pool used."""
    found = fp.running(plane, MULTISLICE)
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in plane.kube.list("v1", "Node")}
    pools_of: dict[str, set[str]] = {}
    for pod in found:
        labels = nodes[pod["spec"]["nodeName"]]
        assert labels[TPU_TOPOLOGY_LABEL] == "2x4", (pod["metadata"]["name"], labels)
        pools_of.setdefault(pod["metadata"]["labels"][fp.JOB_INDEX_LABEL], set()).add(labels[NODEPOOL_LABEL])
    assert len(pools_of) == fp.MULTISLICE_SLICES, sorted(pools_of)
    assert all(len(p) == 1 for p in pools_of.values()), {j: sorted(p) for j, p in pools_of.items() if len(p) != 1}
    taken = sorted(next(iter(p)) for p in pools_of.values())
    assert taken == sorted(node_pool_names(fp.MULTISLICE_POOL, fp.MULTISLICE_SLICES)), taken


def _report(what: str, before: dict, after: dict, runs: tuple[str, ...]) -> None:
    def cell(s: dict) -> str:
        return (f"{s['phase']} (restarts {s['restarts']}, counted {s['restarts_counted']}, "
                f"checkpoint {s['checkpoint_step']})")

    FAULT_REPORT.append(f"== {what}")
    FAULT_REPORT.extend(f"   {run}: {cell(before[run])} -> {cell(after[run])}" for run in runs)


def _status_running(plane: FaultsPlane, runs: tuple[str, ...]) -> dict[str, dict]:
    """`make status` once it shows every one of `runs` running: after a restart JobSet 0.12 keeps its
    RestartingJobSet condition True for a while after the new pods are Ready (the condition is new in
    0.12.0, #1225), and status says `restarting` as long as it is."""
    def shown():
        now = plane.status()
        return now if all(now[r]["phase"] == "running" for r in runs) else None

    return wait_for(f"make status to show {', '.join(runs)} running", shown, fp.TIMEOUT,
                    explain=lambda: str({r: (plane.status()[r]["phase"], fp.jobset(plane, r)["status"].get("conditions"))
                                         for r in runs}))


def _being_admitted(plane: FaultsPlane) -> None:
    """ADMITTING submitted with the provisioner holding: quota reserved on the queued rung, its
    ProvisioningRequest waiting."""
    plane.provisioner("hold")
    plane.submit(ADMITTING)

    def waiting():
        wl = fp.workloads(plane, ADMITTING)
        requests = plane.kube.list("autoscaling.x-k8s.io/v1", "ProvisioningRequest", plane.ns)
        return wl and any(r["metadata"]["name"].startswith(wl[0]["metadata"]["name"]) for r in requests)

    wait_for(f"{ADMITTING} waiting on its ProvisioningRequest", waiting, fp.TIMEOUT,
             explain=lambda: str(admissions(plane.kube, plane.ns)))


@pytest.mark.parametrize("program", faults.PROGRAMS)
def test_a_program_restarted_loses_and_duplicates_nothing(plane, steady, program):
    """Killed while three runs hold their pods and a fourth is being admitted: every running pod is the
    same pod after, nothing restarted or counted, the admitted run gets its pods once."""
    _being_admitted(plane)
    before = plane.status()
    assert [before[r]["phase"] for r in STEADY] == ["running"] * 3, before
    assert before[ADMITTING]["phase"] == "waiting for capacity", before[ADMITTING]

    def meanwhile():
        plane.provisioner("provision")  # GKE provisions while the program is away
        time.sleep(DOWN_SECONDS)

    away = faults.restart(plane.cp, program, meanwhile)
    fp.wait_running(plane, ADMITTING)
    for run in STEADY:
        assert fp.uids(fp.wait_running(plane, run)) == steady[run], f"{run}: its pods were replaced"
    for run in (*STEADY, ADMITTING):
        fp.no_duplicates(plane, run)
        status = fp.jobset(plane, run).get("status", {})
        assert status.get("restarts", 0) == 0 and status.get("restartsCountTowardsMax", 0) == 0, (run, status)
    after = plane.status()
    assert [after[r]["phase"] for r in (*STEADY, ADMITTING)] == ["running"] * 4, after
    _report(f"{program} killed and started again ({away:.1f}s away)", before, after, (*STEADY, ADMITTING))
    plane.remove(ADMITTING)


def _nodes_of(found: list[dict], slice_index: str | None = None) -> list[str]:
    return sorted({p["spec"]["nodeName"] for p in found
                   if slice_index is None or p["metadata"]["labels"].get(fp.JOB_INDEX_LABEL) == slice_index})


def _restarted_once(plane: FaultsPlane, run: str) -> dict | None:
    status = fp.jobset(plane, run).get("status", {})
    return status if status.get("restarts", 0) == 1 else None


def test_spot_vms_taken_back_restart_each_run_once_outside_its_budget(plane, steady):
    """GKE takes back the Spot VMs of one slice of the multislice run and of the ladder run's Spot rung:
    each JobSet restarts every Job once (its Disruption rule: the pods' DisruptionTarget), the
    restart counted in `restarts` and not against `maxRestarts`; the ladder run stays admitted on its
    rung, its pods Pending, while the capacity is gone: Kueue 0.19.2 evicts an admitted workload whose
    pods aren't ready only with `waitForPodsReady` (apis/config/v1beta2/configuration_types.go), which
    the stacks' Kueue configuration doesn't set (manifests/controllers.py), so the run does not fall to
    the next rung; both run again on the same nodes when the capacity returns."""
    before = plane.status()
    multislice = fp.running(plane, MULTISLICE)
    ladder = fp.running(plane, LADDER)
    flavor = next(a.flavors for a in admissions(plane.kube, plane.ns) if a.owner == LADDER)
    taken = _nodes_of(multislice, "1") + _nodes_of(ladder)
    saved = faults.reclaim(plane.kube, taken)
    for run in (MULTISLICE, LADDER):
        wait_for(f"{run} restarted once", lambda r=run: _restarted_once(plane, r), fp.TIMEOUT,
                 explain=lambda r=run: str(fp.jobset(plane, r).get("status")))
    waiting = wait_for("the ladder run's new pods waiting for the Spot nodes", lambda: plane.status()[LADDER]
                       if plane.status()[LADDER]["phase"] != "running" else None, fp.TIMEOUT)
    ladder_admission = next(a for a in admissions(plane.kube, plane.ns) if a.owner == LADDER)
    assert ladder_admission.admitted and ladder_admission.flavors == flavor, ladder_admission
    faults.restore(plane.kube, saved)
    for run, held in ((MULTISLICE, multislice), (LADDER, ladder)):
        again = fp.wait_running(plane, run)
        assert _nodes_of(again) == _nodes_of(held), f"{run}: on {_nodes_of(again)}, before {_nodes_of(held)}"
        fp.no_duplicates(plane, run)
        status = fp.jobset(plane, run)["status"]
        assert status["restarts"] == 1 and status.get("restartsCountTowardsMax", 0) == 0, (run, status)
        steady[run] = fp.uids(again)
    after = _status_running(plane, (MULTISLICE, LADDER))
    for run in (MULTISLICE, LADDER):
        shown = (after[run]["phase"], after[run]["restarts"], after[run]["restarts_counted"])
        assert shown == ("running", 1, 0), after[run]
        assert after[run]["checkpoint_step"] == before[run]["checkpoint_step"] == 40, after[run]
    FAULT_REPORT.append(f"   while the capacity was gone, {LADDER}: {waiting['phase']}: {waiting['detail']}")
    _report("Spot VMs of one multislice slice and of the ladder's Spot rung taken back, then returned",
            before, after, (MULTISLICE, LADDER))


def test_a_higher_priority_run_evicts_one_which_is_readmitted_when_capacity_returns(plane, steady):
    """Every rung held by a run of normal priority; a high-priority run arrives: Kueue evicts one
    (Preempted), which `make status` shows waiting for quota and why; the high-priority run is
    removed and the evicted one is admitted again: the same JobSet, no restart counted, its
    checkpoint where it was."""
    plane.provisioner("provision")
    plane.submit(ADMITTING)
    fp.wait_running(plane, ADMITTING)
    held = (LADDER, SECOND, ADMITTING)
    identity = {run: fp.jobset(plane, run)["metadata"]["uid"] for run in held}
    before = plane.status()
    plane.submit(URGENT)

    def evicted():
        found = {a.owner: a for a in admissions(plane.kube, plane.ns)}
        victims = [r for r in held if not found[r].admitted and "Preempted" in found[r].conditions.get("Evicted", "")]
        return victims if victims and found.get(URGENT) and found[URGENT].admitted else None

    [victim] = wait_for("one run evicted for the high-priority one", evicted, fp.TIMEOUT,
                        explain=lambda: str(admissions(plane.kube, plane.ns)))
    fp.wait_running(plane, URGENT)
    waiting = wait_for(f"{victim} shown waiting", lambda: (lambda s: s if s["phase"] == "waiting for quota"
                                                           else None)(plane.status()[victim]), fp.TIMEOUT)
    assert "Preempted" in waiting["detail"] or "preempt" in waiting["detail"].lower(), waiting
    plane.remove(URGENT)
    again = fp.wait_running(plane, victim)
    for run in held:
        fp.no_duplicates(plane, run)
        assert fp.jobset(plane, run)["metadata"]["uid"] == identity[run], f"{run} is not the same JobSet"
    after = plane.status()
    assert (after[victim]["phase"], after[victim]["restarts_counted"]) == ("running", 0), after[victim]
    assert after[victim]["checkpoint_step"] == 40, after[victim]
    if victim in steady:
        steady[victim] = fp.uids(again)
    FAULT_REPORT.append(f"   while {URGENT} ran, {victim}: {waiting['phase']}: {waiting['detail']}")
    _report(f"{URGENT} (priority high) over {victim} (normal), then removed", before, after, held)
    plane.remove(ADMITTING)


NOT_READY = "node.kubernetes.io/not-ready"
# The tolerations the API server's DefaultTolerationSeconds admission plugin gives every pod that
# declares none of its own for these taints: 300 s of NotReady or unreachable before eviction
# (https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#defaulttolerationseconds).
DEFAULT_TOLERATIONS = {(NOT_READY, 300), ("node.kubernetes.io/unreachable", 300)}


def _not_ready_taint(plane: FaultsPlane, node: str) -> bool:
    return any(t["key"] == NOT_READY and t["effect"] == "NoExecute" for t in faults.node_taints(plane.kube, node))


def _shorten_toleration(plane: FaultsPlane, pod: dict, seconds: int) -> None:
    """The pod's NotReady toleration made `seconds` long: a running pod's tolerationSeconds may change
    (k8s.io/kubernetes v1.35.4 pkg/apis/core/validation `validateOnlyAddedTolerations`). Before its node
    is tainted: once an eviction is scheduled, the taint eviction controller keeps its time
    (pkg/controller/tainteviction `processPodOnNode`)."""
    meta = pod["metadata"]
    shortened = [{**t, "tolerationSeconds": seconds} if (t["key"], t.get("effect")) == (NOT_READY, "NoExecute")
                 else t for t in pod["spec"]["tolerations"]]
    plane.kube.request("PATCH", plane.kube.path("v1", "Pod", meta["namespace"], meta["name"]),
                       {"spec": {"tolerations": shortened}}, "application/strategic-merge-patch+json")


def test_a_node_gone_not_ready_evicts_its_pod_after_the_toleration_and_restarts_outside_the_budget(plane, steady):
    """Two multislice hosts' kubelets report NotReady: the node lifecycle controller taints each node
    NoExecute. A pod with the admission plugin's 300 s toleration (what every run's pod gets, on GKE as
    here: the same controllers; GKE's auto-repair recreates a node NotReady for about 10 minutes,
    https://cloud.google.com/kubernetes-engine/docs/how-to/node-auto-repair) keeps running; a pod whose
    toleration runs out (3 s here, the clock shortened) is evicted by the taint eviction controller
    with DisruptionTarget (DeletionByTaintManager), and the JobSet restarts outside its budget. The
    slices wait for their nodes, and run on them again once the kubelets are back."""
    found = fp.running(plane, MULTISLICE)
    by_slice = {p["metadata"]["labels"][fp.JOB_INDEX_LABEL]: p for p in found
                if p["metadata"]["annotations"].get("batch.kubernetes.io/job-completion-index") == "0"}
    patient, short = by_slice["0"], by_slice["1"]
    nodes = [patient["spec"]["nodeName"], short["spec"]["nodeName"]]
    defaults = {(t["key"], t.get("tolerationSeconds")) for t in patient["spec"]["tolerations"]
                if t.get("effect") == "NoExecute"}
    assert DEFAULT_TOLERATIONS <= defaults, patient["spec"]["tolerations"]
    restarts = fp.jobset(plane, MULTISLICE)["status"].get("restarts", 0)
    before = plane.status()
    try:
        faults.stop_kubelet(plane.kube, nodes[0])
        wait_for(f"{nodes[0]} tainted {NOT_READY}:NoExecute", lambda: _not_ready_taint(plane, nodes[0]), fp.TIMEOUT)
        time.sleep(DOWN_SECONDS)  # within its toleration: nothing moves
        assert fp.uids(fp.running(plane, MULTISLICE) or []) == fp.uids(found), "evicted within its toleration"
        assert fp.jobset(plane, MULTISLICE)["status"].get("restarts", 0) == restarts
        _shorten_toleration(plane, short, 3)
        faults.stop_kubelet(plane.kube, nodes[1])
        wait_for("the JobSet restarted", lambda: fp.jobset(plane, MULTISLICE)["status"].get("restarts", 0)
                 == restarts + 1, fp.TIMEOUT, explain=lambda: str(fp.jobset(plane, MULTISLICE).get("status")))
        during = wait_for("the restarted run shown not running", lambda: (
            lambda s: s if s["phase"] != "running" else None)(plane.status()[MULTISLICE]), fp.TIMEOUT)
        assert not fp.running(plane, MULTISLICE), "the slices ran without their nodes"
    finally:
        for node in nodes:
            faults.start_kubelet(plane.kube, node)
    again = fp.wait_running(plane, MULTISLICE)
    fp.no_duplicates(plane, MULTISLICE)
    status = fp.jobset(plane, MULTISLICE)["status"]
    assert status["restarts"] == restarts + 1 and status.get("restartsCountTowardsMax", 0) == 0, status
    assert set(nodes) <= {p["spec"]["nodeName"] for p in again}
    steady[MULTISLICE] = fp.uids(again)
    after = _status_running(plane, (MULTISLICE,))
    assert (after[MULTISLICE]["phase"], after[MULTISLICE]["restarts_counted"]) == ("running", 0), after[MULTISLICE]
    FAULT_REPORT.append(f"   while {nodes} were NotReady, {MULTISLICE}: {during['phase']}: {during['detail']}")
    _report(f"{nodes} NotReady under {MULTISLICE}, one pod's toleration run out, the kubelets back",
            before, after, (MULTISLICE,))
