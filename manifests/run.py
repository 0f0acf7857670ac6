"""A run and its pool's contract in, the run's JobSet manifest (a plain dict) out.

`build_runs` is what both the Pulumi component (components/runs.py) and the
offline renders (tools/render.py, the plan, the goldens) call, so what is
reviewed is what is applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from core.catalog import Family
from core.contract import SchedulingContract
from core.names import APP_LABEL, POOL_LABEL, PROJECT, RUN_LABEL, BucketLayout, RunPrefixes
from manifests import jobset, kueue, pod, storage
from manifests.ladder import ladder_annotation
from stack.queueing import run_contract, rungs
from stack.config import StackConfig
from stack.runs import RunConfig

APP = PROJECT

# Pulumi submits the run and returns instead of waiting for it to finish
# (a fine-tuning run takes hours).
# https://www.pulumi.com/registry/packages/kubernetes/api-docs/apiextensions/customresource/
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}


@dataclass(frozen=True)
class PlatformFacts:
    """What the platform provides to every run."""

    bucket: str
    images: Mapping[str, str]  # trainer -> image by digest
    namespace: str  # the stack's (StackConfig.runs_namespace)
    service_account: str  # the stack's trainer account (StackConfig.trainer_account)
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    # run -> the path below the stack's datasets/<stack>/ its trainer reads (stack/datasets.py); a run
    # not listed reads its `data` as a path.
    data_paths: Mapping[str, str] = field(default_factory=dict)
    # run -> the paths below datasets/<stack>/ of its `mix` sources, in order (StackConfig.mix_paths).
    mix_paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Where in the bucket each run's prefixes are (core/names.py); the stack's name is in them.
    layout: BucketLayout | None = None

    def prefixes(self, run: str) -> RunPrefixes:
        if self.layout is None:
            raise ValueError("PlatformFacts.layout is needed to mount a run's prefixes")
        return self.layout.run(run)
    # run -> its export prefix (`exports/<stack>/<run>`), for each run with `export:`.
    exports: Mapping[str, str] = field(default_factory=dict)


def platform_facts(config: StackConfig, images: Mapping[str, str]) -> PlatformFacts:
    """What the platform of `config`'s stack provides its runs, with these trainer images."""
    return PlatformFacts(bucket=config.data_bucket, images=images, namespace=config.runs_namespace,
                         service_account=config.trainer_account, data_paths=config.data_paths(),
                         mix_paths=config.mix_paths(), layout=config.bucket_layout, exports=config.export_prefixes())


def build_runs(
    runs: Iterable[RunConfig], contracts: Mapping[str, SchedulingContract], facts: PlatformFacts
) -> dict[str, dict]:
    """Every run's manifest by run name. The runs come validated from the stack's reader (StackConfig's
    rules: stack/runs.py run_problems, each `image` pinned by digest), and `facts.images` holds an image
    of every trainer a run uses by construction (stack/images.py: each is pinned, checked by the reader,
    or built), so nothing is checked again here."""
    return {run.name: build_run(run, run_contract(run, contracts), facts) for run in runs}


def build_run(run: RunConfig, contract: SchedulingContract, facts: PlatformFacts) -> dict:
    meta = metadata(run, contract, facts)
    return jobset.jobset(
        name=run.name,
        namespace=facts.namespace,
        labels=meta["labels"],
        annotations=meta["annotations"],
        job=child_job(run, contract, facts, meta["labels"]),
        replicas=contract.slices,
        # Kueue creates a queued run's pods when it admits the run; it is declared
        # suspended, and Kueue unsuspends it (https://kueue.sigs.k8s.io/docs/tasks/run/jobsets/).
        run_spec={"suspend": run.suspend or contract.queue is not None, "max_restarts": run.max_restarts},
    )


def metadata(run: RunConfig, contract: SchedulingContract, facts: PlatformFacts) -> dict:
    """The JobSet's metadata; it depends on neither the bucket nor the image."""
    labels = {APP_LABEL: APP, RUN_LABEL: run.name, **facts.extra_labels, **queue_labels(run, contract)}
    annotations = dict(SKIP_AWAIT)
    if contract.family is Family.TPU and contract.hosts_per_slice > 1:
        annotations.update(jobset.EXCLUSIVE_TOPOLOGY)
    annotations.update(ladder_annotation(contract))  # the ladder controller's (manifests/ladder.py)
    return {"name": run.name, "namespace": facts.namespace, "labels": labels, "annotations": annotations}


def queue_labels(run: RunConfig, contract: SchedulingContract) -> dict[str, str]:
    """The JobSet's Kueue labels: its LocalQueue and priority class, when Kueue admits it."""
    if contract.queue is None:
        return {}
    labels = {kueue.QUEUE_LABEL: contract.queue}
    if run.priority:
        labels[kueue.PRIORITY_LABEL] = kueue.priority_class_name(contract.namespace, run.priority)
    return labels


def child_job(run: RunConfig, contract: SchedulingContract, facts: PlatformFacts, labels: dict) -> dict:
    """The batch/v1 Job template of one slice: one pod per host, Indexed."""
    # The Kueue labels stay on the JobSet: Kueue admits the JobSet, not its pods.
    labels = {k: v for k, v in labels.items() if k not in (kueue.QUEUE_LABEL, kueue.PRIORITY_LABEL)}
    hosts = contract.hosts_per_slice
    return {
        "spec": {
            "parallelism": hosts,
            "completions": hosts,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "podFailurePolicy": jobset.pod_failure_policy(pod.CONTAINER),
            "template": {
                "metadata": {"labels": dict(labels), "annotations": storage.sidecar_annotations(contract)},
                "spec": pod_spec(run, contract, facts),
            },
        }
    }


def pod_spec(run: RunConfig, contract: SchedulingContract, facts: PlatformFacts) -> dict:
    # Multislice traffic between slices goes over DCN; host networking spares
    # it the pod network's overlay, as GKE's multislice guide does.
    # https://cloud.google.com/kubernetes-engine/docs/how-to/tpu-multislice
    host_network = contract.multislice
    mounts = storage.run_mounts(facts.prefixes(run.name), facts.exports.get(run.name))
    row = run.row_on(contract.family)
    extra_volumes, extra_mounts = pod.extra_volumes(row)
    owner = pod.owner(row)
    spec = {
        "serviceAccountName": facts.service_account,
        # The trainer never calls the Kubernetes API (the service account has
        # no RBAC role). Workload Identity does not read this token: GKE's
        # metadata server identifies the pod, the GCS FUSE driver gets its own
        # token from the kubelet, and a host-network pod's FUSE sidecar a
        # projected token volume its webhook adds.
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": pod.grace_seconds(row),
        "nodeSelector": node_selector(contract),
        "tolerations": [dict(t) for t in contract.pod_tolerations],
        "containers": [container(run, contract, facts, [storage.volume_mount(m) for m in mounts] + extra_mounts)],
        "volumes": [storage.volume(m, facts.bucket, host_network, owner, storage.cache_plan(contract)) for m in mounts]
        + storage.cache_volumes(contract) + extra_volumes,
    }
    spec["securityContext"] = pod.security_context(row)
    if contract.queue is not None:
        spec["affinity"] = ladder_affinity(run, contract)
    elif len(contract.pool_values) > 1:
        # An existing cluster's multislice pool: no one selector names all its node pools.
        spec["affinity"] = pool_affinity(contract.pool_label, contract.pool_values)
    if host_network:
        spec.update({"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"})
    return spec


def ladder_affinity(run: RunConfig, contract: SchedulingContract) -> dict:
    """A queued run's pods may land on the pools of its ladder only.

    Kueue skips a flavor whose node labels the pods' required node affinity
    does not match (pkg/scheduler/flavorassigner/flavorassigner.go,
    flavorSelector), so the run gets no pool of the stack outside its ladder,
    and once admitted the flavor's pool label is one of these. The rungs'
    values are the contract's (stack/queueing.py `run_contract`: the pool
    names, or an existing cluster's node pool names), else the rungs' names.
    """
    return pool_affinity(contract.pool_label or POOL_LABEL, contract.rung_values or rungs(run))


def pool_affinity(label: str, values: Iterable[str]) -> dict:
    """Required node affinity: nodes whose `label` is one of `values`."""
    term = {"matchExpressions": [{"key": label, "operator": "In", "values": list(values)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def node_selector(contract: SchedulingContract) -> dict[str, str]:
    """The contract's selector, exactly; for a run Kueue admits, the part its ladder's rungs share
    (Kueue adds the admitting flavor's labels, the rest of the contract).

    On Standard the pool label pins the pod to the pool's nodes, which
    consume the pool's reservation; the `cloud.google.com/reservation-*`
    labels are documented for Autopilot and node auto-provisioning, which
    create nodes from them, and the contracts of Autopilot shapes carry them
    (stack/contracts.py). A manually created pool's nodes are not said to
    carry them, and a pod selecting them there might never schedule.
    https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations
    """
    return contract.pod_node_selector


def container(run: RunConfig, contract: SchedulingContract, facts: PlatformFacts, mounts: list[dict]) -> dict:
    chips = run.chips_per_host or contract.chips_per_host
    row, data_path = run.row_on(contract.family), facts.data_paths.get(run.name, run.data)
    env = pod.env(run, row, data_path)
    if contract.multislice:
        env = jobset.megascale_env(run.name) + env
    spec = {
        "name": pod.CONTAINER,
        "image": run.image or facts.images[run.trainer],  # own container: its image
        # A digest never changes, so the node's copy is always the right one.
        "imagePullPolicy": "IfNotPresent",
        # One's own container works where its image says.
        **({"workingDir": pod.WORKDIR} if run.trainer is not None else {}),
        "command": pod.command(run, row, chips),
        "args": pod.platform_args(run, row, contract, data_path, facts.mix_paths.get(run.name, ())) + list(run.args),
        "env": env,
        "resources": pod.resources(row, contract, chips),
        "volumeMounts": mounts,
        "securityContext": pod.container_security_context(),
    }
    ports = pod.ports(run, row, contract)
    if ports:
        spec["ports"] = ports
    return spec
