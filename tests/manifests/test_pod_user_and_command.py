"""Who the trainer runs as and how it is started: both from the image's own facts (core/trainers.py)."""

from __future__ import annotations

import json

import pytest

from admission import pod_security
from core.catalog import Family
from core.dockerfile import REPO_ROOT, TRAINER_IMAGES, parse_dockerfile
from core.trainers import OWN_CONTAINER_GPU_ACCOUNT
from stack.own_container import RunAs
from tests.manifests.test_manifests import CASES, pod, trainer
from tests.support import examples
from manifests.run import build_run
from manifests.storage import CSI_DRIVER


def dockerfile_cmd(trainer: str) -> list[str]:
    """The exec-form CMD of the trainer's Dockerfile, read from the file itself."""
    image = TRAINER_IMAGES[trainer]
    [cmd] = [i.value for i in parse_dockerfile((REPO_ROOT / image.dockerfile).read_text()) if i.keyword == "CMD"]
    return json.loads(cmd)


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_the_pod_starts_the_trainer_like_the_image_does(stack, run, contract, manifest):
    """The pod's command is the Dockerfile's CMD plus the process count, and nothing else (one's own
    container: its own command)."""
    command = trainer(manifest)["command"]
    if run.trainer is None:
        assert command == list(run.command)
        return
    image = TRAINER_IMAGES[run.trainer]
    if image.processes_flag:
        i = command.index(image.processes_flag)
        assert command[i + 1] == str(run.chips_per_host or contract.chips_per_host)
        assert command[i + 2 : i + 4] == ["-m", image.entry_module]  # a launcher flag, not a trainer flag
        command = command[:i] + command[i + 2 :]
        launcher = list(run.launcher_args())  # the decoder layer class FSDP wraps, for a run's `model`
        assert command[i:i + len(launcher)] == launcher
        command = command[:i] + command[i + len(launcher):]
    assert command == dockerfile_cmd(run.trainer)


def test_the_gpu_pod_keeps_exit_codes_through_the_launcher_with_one_process_per_gpu():
    [a4] = [r for r in examples.RUNS if r.trainer == "trl-gpu"]
    for chips in (8, 4):
        run = a4.model_copy(update={"chips_per_host": chips})
        command = trainer(build_run(run, examples.CONTRACTS[a4.pool], examples.FACTS))["command"]
        assert command == ["python", "-m", "trainers.trl_gpu.launch",
                           "--config_file", "trainers/trl_gpu/accelerate_fsdp_8gpu.yaml",
                           "--num_processes", str(chips), "-m", "trainers.trl_gpu.sft"]  # fmt: skip
        assert (REPO_ROOT / command[4]).is_file()


def fuse_owner_options(manifest: dict) -> set[tuple[str, ...]]:
    """The uid=/gid= options of every GCS FUSE volume of the pod, one tuple per volume."""
    return {
        tuple(o for o in v["csi"]["volumeAttributes"]["mountOptions"].split(",") if o.startswith(("uid=", "gid=")))
        for v in pod(manifest)["spec"]["volumes"]
        if is_fuse(v)
    }


def is_fuse(volume: dict) -> bool:
    """A Cloud Storage FUSE volume (not the token's, manifests/token.py)."""
    return (volume.get("csi") or {}).get("driver") == CSI_DRIVER


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_the_trainer_owns_its_mounts_as_the_image_user(stack, run, contract, manifest):
    image = run.row_on(contract.family).image  # one's own container: its `runAs`
    security = pod(manifest)["spec"].get("securityContext", {})
    if image.user:
        assert security == {"runAsUser": image.user, "runAsGroup": image.group, "fsGroup": image.group,
                            "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip
        assert fuse_owner_options(manifest) == {(f"uid={image.user}", f"gid={image.group}")}
    else:
        assert "runAsNonRoot" not in security and "runAsUser" not in security
        assert fuse_owner_options(manifest) == {()}


def test_a_non_root_gpu_run_has_the_same_uid_in_its_pod_and_its_mounts():
    [a4] = [r for r in examples.RUNS if r.trainer == "trl-gpu"]
    manifest = build_run(a4, examples.CONTRACTS[a4.pool], examples.FACTS)
    spec = pod(manifest)["spec"]
    assert spec["securityContext"]["runAsUser"] == 1000 and spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["fsGroup"] == 1000
    for volume in (v for v in spec["volumes"] if is_fuse(v)):
        options = volume["csi"]["volumeAttributes"]["mountOptions"].split(",")
        assert "uid=1000" in options and "gid=1000" in options, volume["name"]


def test_a_root_tpu_run_is_not_forced_non_root():
    single = examples.RUNS[0]
    assert single.trainer == "gemma-jax" and TRAINER_IMAGES["gemma-jax"].user == 0
    spec = pod(build_run(single, examples.CONTRACTS[single.pool], examples.FACTS))["spec"]
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert "runAsUser" not in spec["containers"][0]["securityContext"]
    assert not any("uid=" in v["csi"]["volumeAttributes"]["mountOptions"] for v in spec["volumes"] if is_fuse(v))


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_every_trainer_is_confined_as_far_as_its_accelerator_allows(stack, run, contract, manifest):
    """No privilege escalation, no capability, the default seccomp filter and no API token for every pod;
    root only where the accelerator needs it (the TPU trainer, manifests/pod.py), so that every pod meets
    the restricted Pod Security Standard but the TPU ones (baseline) and multislice's (host network)."""
    spec = pod(manifest)["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = trainer(manifest)["securityContext"]
    assert security == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    level, refused = pod_security.least_level(pod(manifest))
    if spec.get("hostNetwork"):
        assert level == pod_security.PRIVILEGED and {v.reason for v in refused} == {"host namespaces", "hostPort"}
    elif run.row_on(contract.family).image.non_root:
        assert level == pod_security.RESTRICTED, refused
    else:
        assert contract.family is Family.TPU and level == pod_security.BASELINE
        assert [v.reason for v in refused] == ["runAsNonRoot != true"], refused


def test_a_run_of_ones_own_container_runs_as_non_root_on_gpu_unless_it_says_otherwise():
    [a4] = [r for r in examples.RUNS if r.trainer == "trl-gpu"]
    own = a4.model_copy(update={"trainer": None, "image": "us-docker.pkg.dev/p/r/own@sha256:" + "a" * 64,
                                "command": ("python", "-m", "team.train"), "args": ()})
    spec = pod(build_run(own, examples.CONTRACTS[a4.pool], examples.FACTS))["spec"]
    assert (spec["securityContext"]["runAsUser"], spec["securityContext"]["runAsGroup"]) == OWN_CONTAINER_GPU_ACCOUNT
    assert pod_security.least_level({"spec": spec})[0] == pod_security.RESTRICTED
    as_root = own.model_copy(update={"run_as": RunAs(user=0, group=0)})
    spec = pod(build_run(as_root, examples.CONTRACTS[a4.pool], examples.FACTS))["spec"]
    assert "runAsUser" not in spec["securityContext"]
    assert pod_security.least_level({"spec": spec})[0] == pod_security.BASELINE
