"""A run's container, as its manifest gives it, started by the Docker engine instead of a kubelet.

What the pod would get, and nothing of the test's own: the image by the
digest the manifest names (pulled from the registry), the container's command
and args (the image's entrypoint, as the platform launches it), its plain env,
the pod's user, group and fsGroup, the container's working directory, dropped
capabilities and no privilege escalation; every volume mounted where the
manifest mounts it, read-only where it says so. Where a pod has the bucket
(GCS FUSE CSI volumes, owned by the mount options' uid and gid), a host
directory owned by the same ids stands in; an emptyDir is a fresh directory, a
Secret volume a directory holding its files. No network at all.

A test may append flags to the args (a tiny model for the CPU, say so in its
report) and add env (`JAX_PLATFORMS=cpu`); everything else comes from the
manifest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from e2e.harness.docker_engine import Engine

RUN_TIMEOUT = 900.0


@dataclass
class ContainerRun:
    """One container of a run's pod template, ready for `docker run`."""

    image: str
    command: list[str]
    args: list[str]
    env: dict[str, str]
    user: int | None  # None: the image's USER
    group: int | None
    fs_group: int | None
    workdir: str | None
    mounts: list[tuple[str, str, bool]] = field(default_factory=list)  # (volume, path, read-only)
    cap_drop: list[str] = field(default_factory=list)
    no_new_privileges: bool = False


def _int(value) -> int | None:
    return None if value is None else int(value)  # the program's numbers may come back as floats


def from_pod(pod: dict, container_name: str | None = None) -> ContainerRun:
    """The container (the first, or the named one) of a pod spec, as a ContainerRun."""
    containers = pod["containers"]
    container = next(c for c in containers if container_name in (None, c["name"]))
    pod_security = pod.get("securityContext") or {}
    security = container.get("securityContext") or {}
    env = {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}
    return ContainerRun(
        image=container["image"], command=list(container.get("command") or []),
        args=list(container.get("args") or []), env=env,
        user=_int(security.get("runAsUser", pod_security.get("runAsUser"))),
        group=_int(security.get("runAsGroup", pod_security.get("runAsGroup"))),
        fs_group=_int(pod_security.get("fsGroup")), workdir=container.get("workingDir"),
        mounts=[(m["name"], m["mountPath"], bool(m.get("readOnly"))) for m in container.get("volumeMounts") or []],
        cap_drop=list((security.get("capabilities") or {}).get("drop") or []),
        no_new_privileges=security.get("allowPrivilegeEscalation") is False,
    )


def volume_dirs(pod: dict, root: Path, files: dict[str, dict[str, str]] | None = None) -> dict[str, Path]:
    """A host directory per volume of the pod: `root/<volume>`, owned as the bucket's FUSE mount
    options own it (uid=, gid=), else by the pod's fsGroup; `files[volume]` written into it."""
    pod_security = pod.get("securityContext") or {}
    dirs = {}
    for volume in pod.get("volumes") or []:
        path = root / volume["name"]
        path.mkdir(parents=True, exist_ok=True)
        options = dict(o.split("=", 1) for o in
                       ((volume.get("csi") or {}).get("volumeAttributes") or {}).get("mountOptions", "").split(",")
                       if "=" in o)
        uid = _int(options.get("uid", pod_security.get("runAsUser")))
        gid = _int(options.get("gid", pod_security.get("fsGroup")))
        for name, text in (files or {}).get(volume["name"], {}).items():
            (path / name).write_text(text)
        if uid is not None or gid is not None:
            for target in [path, *path.rglob("*")]:
                os.chown(target, -1 if uid is None else uid, -1 if gid is None else gid)
        dirs[volume["name"]] = path
    return dirs


def docker_run_argv(run: ContainerRun, volumes: dict[str, Path], name: str, extra_args: list[str] | None = None,
                    extra_env: dict[str, str] | None = None) -> list[str]:
    """`docker run` arguments (after the CLI) that start `run` detached, with no network."""
    argv = ["run", "--detach", "--name", name, "--network", "none"]
    if run.user is not None:
        argv += ["--user", f"{run.user}:{run.group if run.group is not None else run.user}"]
    if run.fs_group is not None:
        argv += ["--group-add", str(run.fs_group)]
    if run.workdir:
        argv += ["--workdir", run.workdir]
    argv += [a for cap in run.cap_drop for a in ("--cap-drop", cap)]
    if run.no_new_privileges:
        argv += ["--security-opt", "no-new-privileges"]
    for key, value in {**run.env, **(extra_env or {})}.items():
        argv += ["--env", f"{key}={value}"]
    for volume, path, read_only in run.mounts:
        argv += ["--volume", f"{volumes[volume]}:{path}{':ro' if read_only else ''}"]
    return [*argv, run.image, *run.command, *run.args, *(extra_args or [])]


@dataclass
class Started:
    engine: Engine
    name: str

    def logs(self) -> str:
        done = self.engine.docker("logs", self.name, check=False)
        return done.stdout + done.stderr

    def signal(self, sig: str) -> None:
        self.engine.docker("kill", "--signal", sig, self.name)

    def wait(self, timeout: float = RUN_TIMEOUT) -> int:
        """The container's exit code (and it removed)."""
        code = int(self.engine.docker("wait", self.name, timeout=timeout).stdout.strip())
        return code

    def remove(self) -> None:
        self.engine.docker("rm", "--force", self.name, check=False)


def start(engine: Engine, run: ContainerRun, volumes: dict[str, Path], name: str, **extra) -> Started:
    engine.docker("rm", "--force", name, check=False)
    engine.docker(*docker_run_argv(run, volumes, name, **extra))
    return Started(engine, name)


def run_to_end(engine: Engine, run: ContainerRun, volumes: dict[str, Path], name: str,
               timeout: float = RUN_TIMEOUT, **extra) -> tuple[int, str]:
    """Start, wait, and return the exit code and the whole log; the container removed."""
    started = start(engine, run, volumes, name, **extra)
    try:
        code = started.wait(timeout)
        return code, started.logs()
    finally:
        started.remove()


def reset(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)


def pull(engine: Engine, ref: str) -> str:
    """Pull `ref` (by digest) from the registry; the digest the engine recorded for it."""
    engine.docker("pull", "--quiet", ref)
    shown = subprocess.run([*engine.cli, "image", "inspect", "--format", "{{json .RepoDigests}}", ref],
                           capture_output=True, text=True, env={**os.environ, **engine.env}, check=True)
    return shown.stdout.strip()
