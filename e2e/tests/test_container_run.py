"""A run's container as `docker run` gets it: what the manifest says, and nothing of the test's own."""

from __future__ import annotations

import os

from e2e.harness import container_run
from e2e.harness.delivery import pod_spec
from e2e.harness.stack_objects import stack_objects


def _pod(stack: str) -> dict:
    return pod_spec(stack_objects(stack).manifests("JobSet")[0])


def test_the_gpu_run_keeps_its_user_groups_capabilities_env_and_mounts(tmp_path):
    pod = _pod("a4")
    run = container_run.from_pod(pod)
    volumes = container_run.volume_dirs(pod, tmp_path, files={"hf-token": {"token": "t"}})
    argv = container_run.docker_run_argv(run, volumes, "n", extra_args=["--max_steps", "2"], extra_env={"X": "1"})
    image_at = argv.index(run.image)
    options, command = argv[:image_at], argv[image_at + 1:]
    assert options[:5] == ["run", "--detach", "--name", "n", "--network"] and options[5] == "none"
    assert ["--user", "1000:1000"] == options[options.index("--user"):options.index("--user") + 2]
    assert ["--group-add", "1000"] == options[options.index("--group-add"):options.index("--group-add") + 2]
    assert ["--cap-drop", "ALL"] == options[options.index("--cap-drop"):options.index("--cap-drop") + 2]
    assert "no-new-privileges" in options and "HF_TOKEN_PATH=/var/run/secrets/huggingface/token" in options
    assert f"{volumes['data']}:/data:ro" in options and f"{volumes['checkpoints']}:/checkpoints" in options
    container = pod["containers"][0]
    assert command == [*container["command"], *container["args"], "--max_steps", "2"]
    # The bucket's FUSE mount options own it by uid=1000,gid=1000: so does its stand-in.
    assert (os.stat(volumes["checkpoints"]).st_uid, os.stat(volumes["checkpoints"]).st_gid) == (1000, 1000)
    assert (volumes["hf-token"] / "token").read_text() == "t"


def test_the_tpu_run_keeps_the_image_s_user(tmp_path):
    pod = _pod("dev")
    run = container_run.from_pod(pod)
    argv = container_run.docker_run_argv(run, container_run.volume_dirs(pod, tmp_path), "n")
    assert run.user is None and "--user" not in argv  # root, as the image says (TPU access)
    assert ["--cap-drop", "ALL"] == argv[argv.index("--cap-drop"):argv.index("--cap-drop") + 2]  # root, no capability
    assert "--workdir" in argv and argv[argv.index("--workdir") + 1] == "/app"
