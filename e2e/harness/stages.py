"""kwok's stages for the e2e nodes and pods: kwok's own stage files, from the module it was built from.

kwok (v0.8.0 pkg/kwok/cmd/root.go) takes its Stages from its --config file
when the Stage CRD isn't enabled, and refuses to start with none. The
stages, from kwok's kustomize/stage/ directory:

- node/fast node-initialize: a node becomes Ready; its capacity and
  allocatable are kept as the harness created them (nodes.py).
- node/heartbeat-with-lease: the node's Lease is renewed, so the node
  lifecycle controller keeps it Ready (kwok --node-lease-duration-seconds).
- both node stages leave alone a node labelled `KUBELET_STOPPED_LABEL`: its
  status is then what a test writes (faults.py: a kubelet reporting NotReady),
  which kwok's node-initialize would otherwise set back to Ready at once.
- pod/fast pod-ready: a bound pod runs.
- a deleted pod ends as the kubelet ends it (`pod-terminate`, the harness's
  own stage): the kubelet stops a deleted pod's containers and reports the
  pod in a terminal phase before it goes: Failed when a container exited
  non-zero, Succeeded when none did, with restartPolicy Never (k8s.io/kubernetes v1.35.4
  pkg/kubelet/kubelet_pods.go getPhase, `podIsTerminal`). Its containers
  exit with `TERMINATED_EXIT_CODE`, the trainers' code for "stopped on
  SIGTERM after saving" (trainers/exit_codes.py), or the pod's
  `EXIT_ON_SIGTERM_ANNOTATION`. Only then can the Job controller match its
  podFailurePolicy (it waits for a terminating pod to be terminal) and drop
  its finalizer; `pod-remove` (the harness's too) then removes the pod once
  it is terminal and no finalizer is left, as the kubelet's final delete
  does when the containers have stopped (kwok's own pod-delete stages wait
  for the grace period, 300 s for the runs, or ignore the finalizers).
- pod/fast pod-complete, narrowed: kwok's version completes every pod a Job
  owns as soon as it runs. Here it completes the pods of plain Jobs (the
  staging Jobs), and a JobSet's pods only when labelled `COMPLETE_LABEL`,
  so a run stays Running until a test finishes it.
- pod/chaos pod-container-running-failed: a running pod labelled
  `pod-container-running-failed.stage.kwok.x-k8s.io=true` fails with the exit
  code of its `.../exit-code` annotation (kwok's own chaos stage).
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from trainers.exit_codes import TERMINATED

COMPLETE_LABEL = "e2e.gke-finetune/complete"
FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
FAIL_EXIT_CODE_ANNOTATION = "pod-container-running-failed.stage.kwok.x-k8s.io/exit-code"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
EXIT_ON_SIGTERM_ANNOTATION = "e2e.gke-finetune/exit-code-on-sigterm"
KUBELET_STOPPED_LABEL = "e2e.gke-finetune/kubelet-stopped"
NODE_STAGES = ("node-initialize", "node-heartbeat-with-lease")
TERMINATED_EXIT_CODE = TERMINATED

STAGE_FILES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/chaos/pod-container-running-failed.yaml",
)


def _load(stages_dir: Path, relative: str) -> dict:
    path = stages_dir / relative
    if not path.exists():
        raise FileNotFoundError(f"e2e: kwok stage {path} is missing from the built kwok tool: run make e2e-tools")
    return yaml.safe_load(path.read_text())


def _narrowed_complete(stage: dict) -> list[dict]:
    """kwok's pod-complete, twice: for plain Jobs' pods, and for JobSet pods labelled COMPLETE_LABEL."""
    plain, labelled = copy.deepcopy(stage), copy.deepcopy(stage)
    plain["metadata"]["name"] = "pod-complete-job"
    plain["spec"]["selector"]["matchExpressions"].append(
        {"key": f'.metadata.labels["{JOBSET_NAME_LABEL}"]', "operator": "DoesNotExist"})
    labelled["metadata"]["name"] = "pod-complete-labelled"
    labelled["spec"]["selector"]["matchExpressions"].append(
        {"key": f'.metadata.labels["{COMPLETE_LABEL}"]', "operator": "In", "values": ["true"]})
    return [plain, labelled]


def _terminate_on_delete() -> dict:
    """A deleted, running pod: every container terminated with SIGTERM's exit code; the pod Failed,
    or Succeeded where that code is 0 (getPhase: every container stopped, none in failure)."""
    template = """
{{ $now := Now }}
{{ $annotations := or .metadata.annotations dict }}
{{ $code := or ( index $annotations "%s" ) %d }}
containerStatuses:
{{ range $index, $item := .spec.containers }}
- image: {{ $item.image | Quote }}
  name: {{ $item.name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {{ $code }}
      finishedAt: {{ $now | Quote }}
      reason: Error
      startedAt: {{ $now | Quote }}
{{ end }}
phase: {{ if eq ( printf "%%v" $code ) "0" }}Succeeded{{ else }}Failed{{ end }}
""" % (EXIT_ON_SIGTERM_ANNOTATION, TERMINATED_EXIT_CODE)
    return _pod_stage("pod-terminate", {".metadata.deletionTimestamp": ("Exists",),
                                         ".status.phase": ("In", "Pending", "Running")},
                      {"statusTemplate": template})


def _remove_when_terminal() -> dict:
    return _pod_stage("pod-remove", {".metadata.deletionTimestamp": ("Exists",),
                                     ".metadata.finalizers": ("DoesNotExist",),
                                     ".status.phase": ("In", "Failed", "Succeeded")},
                      {"delete": True})


def _pod_stage(name: str, match: dict[str, tuple[str, ...]], then: dict) -> dict:
    """A kwok Stage for pods: `match` maps a field to (operator, values...)."""
    expressions = [{"key": key, "operator": op, **({"values": list(values)} if values else {})}
                   for key, (op, *values) in match.items()]
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
            "spec": {"resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                     "selector": {"matchExpressions": expressions}, "next": then}}


def _unless_kubelet_stopped(stage: dict) -> dict:
    stage["spec"]["selector"].setdefault("matchExpressions", []).append(
        {"key": f'.metadata.labels["{KUBELET_STOPPED_LABEL}"]', "operator": "DoesNotExist"})
    return stage


def kwok_stages(stages_dir: Path) -> list[dict]:
    stages = [_terminate_on_delete(), _remove_when_terminal()]
    for relative in STAGE_FILES:
        stage = _load(stages_dir, relative)
        if stage["metadata"]["name"] in NODE_STAGES:
            stage = _unless_kubelet_stopped(stage)
        stages += _narrowed_complete(stage) if stage["metadata"]["name"] == "pod-complete" else [stage]
    return stages


def write_kwok_config(path: Path, stages_dir: Path) -> Path:
    path.write_text(yaml.safe_dump_all(kwok_stages(stages_dir), sort_keys=False))
    return path
