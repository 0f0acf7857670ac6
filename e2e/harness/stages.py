"""kwok's stages for the e2e nodes and pods: kwok's own stage files, from the module it was built from.

kwok (v0.8.0 pkg/kwok/cmd/root.go) takes its Stages from its --config file
when the Stage CRD isn't enabled, and refuses to start with none. The
stages, from kwok's kustomize/stage/ directory:

- node/fast node-initialize: a node becomes Ready; its capacity and
  allocatable are kept as the harness created them (nodes.py).
- node/heartbeat-with-lease: the node's Lease is renewed, so the node
  lifecycle controller keeps it Ready (kwok --node-lease-duration-seconds).
- pod/fast pod-ready and pod-delete: a bound pod runs; a deleted one goes.
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

COMPLETE_LABEL = "e2e.gke-finetune/complete"
FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
FAIL_EXIT_CODE_ANNOTATION = "pod-container-running-failed.stage.kwok.x-k8s.io/exit-code"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"

STAGE_FILES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-delete.yaml",
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


def kwok_stages(stages_dir: Path) -> list[dict]:
    stages = []
    for relative in STAGE_FILES:
        stage = _load(stages_dir, relative)
        stages += _narrowed_complete(stage) if stage["metadata"]["name"] == "pod-complete" else [stage]
    return stages


def write_kwok_config(path: Path, stages_dir: Path) -> Path:
    path.write_text(yaml.safe_dump_all(kwok_stages(stages_dir), sort_keys=False))
    return path
