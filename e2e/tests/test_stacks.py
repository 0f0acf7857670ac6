"""Every shipped stack through the real control plane: accepted, created, bound, admitted, staged first."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from core.names import POOL_LABEL
from e2e.harness.kube import wait_for
import pytest

from admission import fit
from e2e.harness.fuse_sidecar import SIDECAR
from e2e.harness.observe import QUEUE_LABEL, admissions, scheduler_requests, wait_bound
from stack.queueing import rungs

POD_TIMEOUT = 120.0


def _jobsets(stack_run) -> list[dict]:
    return stack_run.objects.manifests("JobSet")


def _run_config(stack_run, name: str):
    return next(r for r in stack_run.objects.config.runs if r.name == name)


def _node_pools(stack_run) -> dict[str, str]:
    """node name -> the logical pool label the node pool declared."""
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(POOL_LABEL, "")
            for n in stack_run.kube.list("v1", "Node")}


def _bound_pods(stack_run, jobset: dict) -> list:
    return wait_bound(stack_run.kube, jobset, POD_TIMEOUT)


def test_every_declared_object_is_accepted_and_stored(stack_run):
    kube = stack_run.kube
    for manifest in stack_run.objects.applicable():
        meta = manifest["metadata"]
        stored = kube.get(manifest["apiVersion"], manifest["kind"], meta["name"], meta.get("namespace"))
        assert stored["metadata"]["uid"], manifest
    assert stack_run.installed.applied, "nothing was applied"
    left_out = {m["metadata"]["name"] for m in stack_run.objects.manifests() if m not in stack_run.objects.applicable()}
    assert all(any(name in x for x in stack_run.installed.left_out) for name in left_out)


def test_staging_jobs_complete_before_the_runs_that_read_them_are_submitted(stack_run):
    kube, objects = stack_run.kube, stack_run.objects
    jobs = {s.name: s.manifest for s in objects.steps if s.manifest and s.manifest["kind"] == "Job"}
    assert len(stack_run.installed.jobs_completed) == len(jobs)
    for step in objects.steps:
        if not step.manifest or step.manifest["kind"] != "JobSet":
            continue
        meta = step.manifest["metadata"]
        submitted = kube.get("jobset.x-k8s.io/v1alpha2", "JobSet", meta["name"], meta["namespace"])
        for dep in (d for d in step.after if d in jobs):
            job = kube.get("batch/v1", "Job", jobs[dep]["metadata"]["name"], jobs[dep]["metadata"]["namespace"])
            done = datetime.fromisoformat(job["status"]["completionTime"])
            assert done <= datetime.fromisoformat(submitted["metadata"]["creationTimestamp"]), (dep, meta["name"])


def _shape_labels(stack_run, run) -> dict[str, str]:
    """The accelerator labels of the shape of the run's first rung (Autopilot: the node's class rule)."""
    return stack_run.objects.config.contracts()[run.pool].shape.node_selector()


def test_every_run_pod_is_created_and_bound_to_a_node_of_its_pool(stack_run):
    pools = _node_pools(stack_run)
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in stack_run.kube.list("v1", "Node")}
    for jobset in _jobsets(stack_run):
        run = _run_config(stack_run, jobset["metadata"]["name"])
        for pod in _bound_pods(stack_run, jobset):
            if stack_run.objects.autopilot:  # no pools: a node Autopilot made for the run's shape
                labels = nodes[pod.node]
                assert all(labels.get(k) == v for k, v in _shape_labels(stack_run, run).items()), (pod, labels)
            else:
                assert pools[pod.node] in rungs(run), (pod, rungs(run))


def test_each_slice_is_on_one_node_pool_and_slices_are_exclusive(stack_run):
    for jobset in _jobsets(stack_run):
        by_job: dict[str, set[str]] = defaultdict(set)
        for pod in _bound_pods(stack_run, jobset):
            by_job[pod.job].add(pod.node_pool)
        assert all(len(pools) == 1 for pools in by_job.values()), dict(by_job)
        used = [next(iter(p)) for p in by_job.values()]
        assert len(used) == len(set(used)), f"two slices of {jobset['metadata']['name']} share a pool: {dict(by_job)}"


def test_kueue_admits_each_queued_run_on_its_first_rung(stack_run):
    queued = {j["metadata"]["name"]: j for j in _jobsets(stack_run) if QUEUE_LABEL in j["metadata"].get("labels", {})}
    if not queued:
        assert not stack_run.objects.manifests("ClusterQueue"), "a ClusterQueue but no queued run"
        return
    ns = stack_run.objects.runs_namespace

    def admitted():
        found = {a.owner: a for a in admissions(stack_run.kube, ns) if a.owner in queued}
        return found if len(found) == len(queued) and all(a.admitted for a in found.values()) else None

    found = wait_for("Kueue admitting every queued run", admitted, POD_TIMEOUT,
                     explain=lambda: str(admissions(stack_run.kube, ns)))
    for name, admission in found.items():
        first = rungs(_run_config(stack_run, name))[0]
        assert set(admission.flavors.values()) == {stack_run.objects.config.contracts()[first].flavor}, (name, admission)


def _template(jobset: dict, job: str) -> dict:
    """The pod template of the replicated job a child Job (`<jobset>-<replicated job>-<index>`) belongs to."""
    name = jobset["metadata"]["name"]
    return next(rj["template"]["spec"]["template"] for rj in jobset["spec"]["replicatedJobs"]
                if job.startswith(f"{name}-{rj['name']}-"))


def test_the_scheduler_counts_each_run_pod_as_the_fit_model_does(stack_run):
    """admission/fit.py's requests of a run's pod template against what kube-scheduler counts for
    the pod the Job controller made of it, GKE's injected FUSE sidecar included. The pods'
    memory-backed emptyDirs are within their writers' memory limits (admission/fit.py), so the
    model counts them as the scheduler does: in the requests, equal to the limits."""
    kube, cp = stack_run.kube, stack_run.cp
    for jobset in _jobsets(stack_run):
        ns = jobset["metadata"]["namespace"]
        pods = _bound_pods(stack_run, jobset)
        counted = scheduler_requests(f"https://127.0.0.1:{cp.ports['scheduler']}", cp.pki.tokens["admin"])
        for pod in pods:
            template = _template(jobset, pod.job)
            if template["metadata"].get("annotations", {}).get(fit.FUSE_ANNOTATION) == "true":
                stored = kube.get("v1", "Pod", pod.pod, ns)
                assert stored["spec"]["initContainers"][0]["name"] == SIDECAR, pod
            model = fit.pod_requests(template)
            seen = counted[(ns, pod.pod)]
            for resource in fit.RESOURCES:
                assert seen.get(resource, 0.0) == pytest.approx(model[resource], rel=1e-9), (pod.pod, resource)


def test_a_run_of_ones_own_container_gets_the_platform_s_mounts_env_and_identity(stack_run):
    """One's own container, as the API server stores its pods (GKE's FUSE sidecar injected): its own
    image, command and arguments; the trainer service account; the bucket's prefixes mounted where its
    environment says; on its pool's nodes (the tests above: bound on its rung, admitted by Kueue)."""
    own = [r for r in stack_run.objects.config.runs if r.trainer is None]
    if not own:
        return
    kube, pools = stack_run.kube, _node_pools(stack_run)
    jobsets = {j["metadata"]["name"]: j for j in _jobsets(stack_run)}
    for run in own:
        jobset = jobsets[run.name]
        template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        placed = _bound_pods(stack_run, jobset)
        assert len(placed) == stack_run.objects.config.contracts()[run.pool].hosts_per_slice
        for pod in placed:
            assert pools[pod.node] == run.pool, (pod, run.pool)  # its ladder's first rung
            spec = kube.get("v1", "Pod", pod.pod, jobset["metadata"]["namespace"])["spec"]
            (container,) = [c for c in spec["containers"] if c["name"] == "trainer"]
            assert (container["image"], container["command"], container["args"]) == (
                run.image, list(run.command), list(run.args))
            assert spec["serviceAccountName"] == template["serviceAccountName"]
            assert spec["initContainers"][0]["name"] == SIDECAR  # the bucket through GKE's FUSE sidecar
            env = {e["name"]: e.get("value") for e in container["env"]}
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            volumes = {v["name"]: v for v in spec["volumes"]}
            stack = stack_run.objects.config.stack  # every prefix carries it (core/names.py)
            for variable, prefix in (("GKE_FINETUNE_DATA", f"datasets/{stack}"),
                                     ("GKE_FINETUNE_CHECKPOINTS", f"checkpoints/{stack}/{run.name}"),
                                     ("GKE_FINETUNE_PROFILES", f"profiles/{stack}/{run.name}")):
                mount = "/" + env[variable].strip("/").split("/")[0]
                attributes = volumes[mounts[mount]]["csi"]["volumeAttributes"]
                assert f"only-dir={prefix}" in attributes["mountOptions"], (variable, attributes)
            assert env["GKE_FINETUNE_PROGRESS"] == env["GKE_FINETUNE_CHECKPOINTS"] + "/progress.json"
            assert env["GKE_FINETUNE_RUN"] == run.name
            if stack_run.objects.config.contracts()[run.pool].hosts_per_slice > 1:  # the TPU hosts reach each other
                assert {"containerPort": 8471, "name": "tpu-runtime", "protocol": "TCP"} in container["ports"]
