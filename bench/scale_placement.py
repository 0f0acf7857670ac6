"""JobSet's other strategy of exclusive placement, given to a stack's declared objects so that the scale
benchmark runs both side by side (the program itself places slices by pod affinity: manifests/jobset.py).

JobSet v0.12.0 keeps each Job of a JobSet annotated `alpha.jobset.sigs.k8s.io/exclusive-topology` on a
topology domain (here a node pool) of its own, one of two ways:

- pod affinity (the default): its pod webhook gives each Job's leader pod (completion index 0) a
  required pod affinity to its own Job and a required anti-affinity to every other Job, by node pool;
  followers are refused until the leader is bound, then get a node selector for the leader's node
  pool (pkg/webhooks/pod_webhook.go: `patchPod`, `setExclusiveAffinities`, `ValidateCreate`);
- node selector (`alpha.jobset.sigs.k8s.io/node-selector`): the controller gives each Job the node
  selector `alpha.jobset.sigs.k8s.io/namespaced-job: <namespace>_<job>` and a toleration of the taint
  `alpha.jobset.sigs.k8s.io/no-schedule`, and the pod webhook leaves the pods alone
  (pkg/controllers/jobset_controller.go: `addNamespacedJobNodeSelector`, `addTaintToleration`). The
  nodes must carry that label and taint already ("the user must add the JobSet name node label to the
  desired topologies separately", api/jobset/v1alpha2/jobset_types.go `NodeSelectorStrategyKey`);
  JobSet's hack/label_nodes/label_nodes.py labels and taints one GKE node pool per Job, "to
  dramatically speed up scheduling of pods for very large JobSets".

`node_selector_strategy` does what that script does, on the node pools' declared inputs (labels and
taints a node pool declares, which GKE updates in place:
https://cloud.google.com/kubernetes-engine/docs/how-to/update-existing-nodepools), and annotates the
run: slice `i`'s node pool `<pool>-s<i>` gets the label of Job `<run>-trainer-<i>`.
"""

from __future__ import annotations

import copy
import dataclasses

from core.names import REPLICATED_JOB
from e2e.harness.stack_objects import Applied, StackObjects
from stack.contracts import node_pool_names

# api/jobset/v1alpha2/jobset_types.go (v0.12.0): NodeSelectorStrategyKey, NamespacedJobKey, NoScheduleTaintKey.
NODE_SELECTOR_STRATEGY_KEY = "alpha.jobset.sigs.k8s.io/node-selector"
NAMESPACED_JOB_LABEL = "alpha.jobset.sigs.k8s.io/namespaced-job"
NO_SCHEDULE_TAINT = {"key": "alpha.jobset.sigs.k8s.io/no-schedule", "value": "true", "effect": "NO_SCHEDULE"}


def namespaced_job(namespace: str, run: str, index: int) -> str:
    """The label value the JobSet controller selects for Job `index` of `run` (`namespacedJobName`)."""
    return f"{namespace}_{run}-{REPLICATED_JOB}-{index}"


def node_selector_strategy(objects: StackObjects, run: str, pool: str, slices: int) -> StackObjects:
    """The objects with `run` placed by node selector on the `slices` node pools of `pool`."""
    labels = {gke: namespaced_job(objects.runs_namespace, run, i)
              for i, gke in enumerate(node_pool_names(pool, slices))}
    node_pools = []
    for inputs in objects.node_pools:
        inputs = copy.deepcopy(inputs)
        if inputs["name"] in labels:
            config = inputs.setdefault("nodeConfig", {})
            config["labels"] = {**(config.get("labels") or {}), NAMESPACED_JOB_LABEL: labels[inputs["name"]]}
            config["taints"] = [*(config.get("taints") or []), dict(NO_SCHEDULE_TAINT)]
        node_pools.append(inputs)
    steps = []
    for step in objects.steps:
        manifest = step.manifest
        if manifest and manifest["kind"] == "JobSet" and manifest["metadata"]["name"] == run:
            manifest = copy.deepcopy(manifest)
            manifest["metadata"]["annotations"][NODE_SELECTOR_STRATEGY_KEY] = "true"
            step = Applied(step.name, manifest, step.release, step.after)
        steps.append(step)
    return dataclasses.replace(objects, node_pools=node_pools, steps=steps)
