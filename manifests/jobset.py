"""Every run is one JobSet (jobset.x-k8s.io/v1alpha2, JobSet v0.12.0).

Single-host TPU, multi-host TPU, multislice TPU and A4 runs all take the same
shape: one replicated job named `trainer` with `replicas` = slices (1 except for
multislice) and `parallelism` = `completions` = hosts per slice. One kind for
every run gives every run the same failure policy (restart on disruption
without counting, fail fast on configuration errors), the same lifecycle under
Pulumi, and the same DNS names; a bare Job could not restart its pods as a
group, which multi-host training needs.
https://jobset.sigs.k8s.io/docs/concepts/
"""

from __future__ import annotations

from collections.abc import Mapping

from core.catalog import NODEPOOL_LABEL
from core.names import REPLICATED_JOB
from core.trainers import CONFIG_ERROR

API_VERSION = "jobset.x-k8s.io/v1alpha2"
KIND = "JobSet"

# One Job per slice, each on its own node pool, none sharing a pool with
# another Job: a slice's hosts must all be the VMs of one TPU slice (ICI).
# https://jobset.sigs.k8s.io/docs/tasks/tpu_multislice/
EXCLUSIVE_TOPOLOGY = {"alpha.jobset.sigs.k8s.io/exclusive-topology": NODEPOOL_LABEL}

# Job failure messages the Job controller writes when a podFailurePolicy
# FailJob rule matches (k8s.io/kubernetes pkg/controller/job/pod_failure_policy.go).
CONFIG_ERROR_MESSAGE = f"failed with exit code {CONFIG_ERROR} matching FailJob rule"
DISRUPTION_MESSAGE = "has condition DisruptionTarget matching FailJob rule"


def pod_failure_policy(container: str) -> dict:
    """How a child Job reacts to a failed pod: every failure fails the Job at once.

    backoffLimit is 0, so the JobSet (not the Job) decides what a failure
    means; the two FailJob rules only label the failure so the JobSet's rules
    can tell a configuration error and a disruption from anything else. An
    `Ignore` on disruptions would recreate a single pod of a multi-host slice,
    whose peers are still waiting in a collective that never completes.
    https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-failure-policy
    """
    return {
        "rules": [
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": container, "operator": "In", "values": [CONFIG_ERROR]},
            },
            {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]
    }


def failure_policy(max_restarts: int) -> dict:
    """The JobSet's reaction to a failed Job; rules are evaluated in order.

    - ConfigError: the trainer exited 78; no restart can fix it.
    - Disruption: preemption, maintenance or eviction; restart every Job
      (the trainers resume from their last checkpoint) without counting it.
    - Other: any other failure restarts the run, at most `max_restarts` times.
    https://jobset.sigs.k8s.io/docs/concepts/#failure-policy
    """
    return {
        "maxRestarts": max_restarts,
        "restartStrategy": "Recreate",
        "rules": [
            {
                "name": "ConfigError",
                "action": "FailJobSet",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "onJobFailureMessagePatterns": [CONFIG_ERROR_MESSAGE],
            },
            {
                "name": "Disruption",
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "onJobFailureMessagePatterns": [DISRUPTION_MESSAGE],
            },
            {"name": "Other", "action": "RestartJobSet"},
        ],
    }


def megascale_env(run_name: str) -> list[dict]:
    """What JAX needs to join the slices of a multislice run over DCN.

    GKE's TPU webhook injects TPU_WORKER_ID and TPU_WORKER_HOSTNAMES, and for
    JobSets of several replicas the MEGASCALE_* variables as well: xpk's TPU
    JobSet declares none of them (github.com/AI-Hypercomputer/xpk
    src/xpk/commands/workload.py, WORKLOAD_CREATE_YAML). They are declared
    here anyway, from the labels JobSet puts on every pod, the way xpk's
    Pathways workers get them (src/xpk/templates/pathways_workload_create.yaml.j2):
    the slice count from `jobset.sigs.k8s.io/replicatedjob-replicas`, the
    slice index from `jobset.sigs.k8s.io/job-index`, and as coordinator the
    first pod of the first slice, whose DNS name JobSet derives as
    <jobset>-<replicated job>-<job index>-<pod index>.<subdomain>. The manifest
    then says what JAX receives instead of relying on an injection that no
    API documents.
    """
    return [
        {"name": "MEGASCALE_COORDINATOR_ADDRESS", "value": coordinator_host(run_name)},
        _label_env("MEGASCALE_NUM_SLICES", "jobset.sigs.k8s.io/replicatedjob-replicas"),
        _label_env("MEGASCALE_SLICE_ID", "jobset.sigs.k8s.io/job-index"),
    ]


def coordinator_host(run_name: str) -> str:
    return f"{run_name}-{REPLICATED_JOB}-0-0.{run_name}"


def _label_env(name: str, label: str) -> dict:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{label}']"}}}


def jobset(
    name: str, namespace: str, labels: dict, annotations: dict, job: dict, replicas: int, run_spec: dict
) -> dict:
    """The JobSet around one child Job template.

    Fields JobSet's defaulting webhook would fill in (successPolicy,
    startupPolicy, network, groupName, restartStrategy) are declared with the
    webhook's values, so that what Pulumi sends equals what the cluster keeps
    and `preview` shows no phantom diff.
    """
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {
            "suspend": run_spec["suspend"],
            "failurePolicy": failure_policy(run_spec["max_restarts"]),
            "successPolicy": {"operator": "All"},
            "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
            # Pods reach each other as <pod hostname>.<subdomain>; GKE's TPU
            # webhook reads these hostnames into TPU_WORKER_HOSTNAMES.
            # https://cloud.google.com/kubernetes-engine/docs/how-to/tpus#run-multi-host
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True, "subdomain": name},
            "replicatedJobs": [
                {"name": REPLICATED_JOB, "groupName": "default", "replicas": replicas, "template": job}
            ],
        },
    }


def child_jobs(manifest: Mapping) -> dict[str, dict]:
    """Each replicated job of a JobSet as a standalone batch/v1 Job, by `<jobset>-<replicated job>`.

    The Job's spec is the replicated job's template as the builders made it;
    the metadata is the JobSet's (JobSet itself adds its own labels to the
    Jobs it creates, `<jobset>-<replicated job>-<index>`). For validation
    and scanners only: these Jobs are never applied, a JobSet is what runs.
    """
    meta = manifest["metadata"]
    jobs = {}
    for replicated in manifest["spec"]["replicatedJobs"]:
        name = f"{meta['name']}-{replicated['name']}"
        jobs[name] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": meta["namespace"], "labels": dict(meta["labels"])},
            "spec": replicated["template"]["spec"],
        }
    return jobs


def containers(manifest: Mapping) -> list[dict]:
    """Every container of every pod template of a JobSet."""
    return [
        container
        for replicated in manifest["spec"]["replicatedJobs"]
        for container in replicated["template"]["spec"]["template"]["spec"]["containers"]
    ]
