"""A Docker engine and an image registry on 127.0.0.1, for building, pushing and running the trainer images.

The engine is Debian's `docker.io` (dockerd 20.10 with its embedded BuildKit,
containerd, runc), the registry Debian's `docker-registry` (distribution 2.8);
`make e2e-tools` installs both (e2e/tools/debian-packages.sh). Neither runs as a
system service: the harness starts them as its own programs (processes.py), so
they stop with the control plane, on a signal, or by the watchdog.

These machines have no bridge network for containers and must never get one:
dockerd starts with `--bridge=none` and without touching iptables or IP
forwarding; builds use the host's network and runs none. Its data root (images,
the build cache) and exec root live under the tools' cache, so a later run
rebuilds nothing that did not change; its socket and its client configuration
(the buildx plugin, no credentials) are the run's. The registry listens on
127.0.0.1 only, on a port the kernel picks, with our own configuration (Debian's
packaged one listens on every interface); its storage is under the tools' cache
too, and so is its port, kept from one run to the next while it is free (the
engine knows which layers a registry has by its address). Docker treats
registries on 127.0.0.0/8 as insecure (plain HTTP) by default.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from e2e.harness.cluster import LOCALHOST, free_port
from e2e.harness.kube import wait_for
from e2e.harness.processes import Supervisor
from e2e.harness.tools import Tools, ToolsMissing

DOCKERD = Path("/usr/sbin/dockerd")
DOCKER = Path("/usr/bin/docker")  # Debian's CLI, the engine's own version
REGISTRY = Path("/usr/bin/docker-registry")
HOME = Path(os.environ.get("GKE_FINETUNE_DOCKER", Path.home() / ".cache" / "gke-finetune" / "docker"))
# No bridge, no NAT, no forwarding, no firewall rules: nothing of the host's network changes.
NETWORK_FLAGS = ("--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false", "--ip-forward=false")
# Containers get this long to stop when dockerd stops, inside the harness's stop grace.
SHUTDOWN_TIMEOUT = 2
START_TIMEOUT = 60.0
COMMAND_TIMEOUT = 1800.0
MANIFEST_TYPES = ("application/vnd.docker.distribution.manifest.v2+json",
                  "application/vnd.oci.image.manifest.v1+json",
                  "application/vnd.docker.distribution.manifest.list.v2+json",
                  "application/vnd.oci.image.index.v1+json")


class DockerError(RuntimeError):
    pass


@dataclass(frozen=True)
class Registry:
    host: str  # 127.0.0.1:<port>

    def _get(self, path: str, accept: tuple[str, ...] = MANIFEST_TYPES) -> tuple[dict, dict]:
        req = urllib.request.Request(f"http://{self.host}/v2/{path}", headers={"Accept": ", ".join(accept)})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"{}"), dict(resp.headers)

    def digest(self, repository: str, reference: str) -> str:
        """The registry's digest of a manifest (Docker-Content-Digest), by tag or digest."""
        _, headers = self._get(f"{repository}/manifests/{reference}")
        return headers["Docker-Content-Digest"]

    def manifest(self, repository: str, reference: str) -> dict:
        return self._get(f"{repository}/manifests/{reference}")[0]

    def layers(self, repository: str, reference: str) -> list[dict]:
        """The layers ({digest, size}) of a single-platform image's manifest."""
        return self.manifest(repository, reference)["layers"]

    def tags(self, repository: str) -> list[str]:
        try:
            return self._get(f"{repository}/tags/list", ("application/json",))[0].get("tags") or []
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return []
            raise


@dataclass(frozen=True)
class Engine:
    socket: Path
    config_dir: Path  # DOCKER_CONFIG: the buildx CLI plugin, no credentials
    registry: Registry

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    @property
    def env(self) -> dict[str, str]:
        """What a Docker client (the CLI, buildx, the docker-build provider) needs to use this engine."""
        return {"DOCKER_HOST": self.host, "DOCKER_CONFIG": str(self.config_dir),
                "BUILDX_CONFIG": str(self.config_dir / "buildx"), "DOCKER_CLI_HINTS": "false"}

    @property
    def cli(self) -> list[str]:
        return [str(DOCKER), "--host", self.host]

    def docker(self, *args: str, check: bool = True, timeout: float = COMMAND_TIMEOUT,
               input: str | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run([*self.cli, *args], capture_output=True, text=True, timeout=timeout, input=input,
                              env={**os.environ, **self.env})
        if check and done.returncode != 0:
            raise DockerError(f"e2e: docker {' '.join(args)} exited {done.returncode}:\n"
                              f"{(done.stdout + done.stderr)[-4000:]}")
        return done

    def remove_containers(self) -> None:
        """Every container of this engine, running or not: none outlives the harness."""
        ids = self.docker("ps", "--all", "--quiet", check=False).stdout.split()
        if ids:
            self.docker("rm", "--force", *ids, check=False)


def _require_programs() -> None:
    missing = [str(p) for p in (DOCKERD, DOCKER, REGISTRY) if not p.exists()]
    if missing:
        raise ToolsMissing(f"e2e: {missing} not installed: run make e2e-tools (Debian's docker.io and "
                           "docker-registry, e2e/tools/debian-packages.sh)")


def _client_config(state: Path, tools: Tools) -> Path:
    """A Docker client configuration of this run: the buildx plugin, no credentials."""
    config = state / "docker-config"
    plugins = config / "cli-plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    (config / "config.json").write_text("{}\n")
    link = plugins / "docker-buildx"
    link.unlink(missing_ok=True)
    link.symlink_to(tools.bin("docker-buildx"))
    return config


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (state, parent pid, ...); [] when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _alive(pid: int) -> bool:
    """Running (a zombie has ended: only its parent's wait is missing)."""
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def _supervisor(pid: int) -> int | None:
    """The e2e process that started `pid` (the harness's Supervisor, a Python process), if it still runs."""
    fields = _stat(pid)
    try:
        parent = int(fields[1])
        command = Path(f"/proc/{parent}/cmdline").read_bytes()
    except (IndexError, ValueError, OSError):
        return None
    return parent if parent != 1 and b"python" in command else None


def _clear_earlier_engine() -> None:
    """An engine of an earlier run that is still up (its run killed before its supervisor could stop it)
    holds the data root; dockerd refuses to start while its pid file is there ("pid file found, ensure
    docker is not running"). An orphan on this data root (its supervisor gone) is stopped as its
    supervisor would have stopped it; one whose supervisor still runs belongs to another e2e session and
    is refused by name; the file of one that is gone is removed."""
    pidfile = HOME / "dockerd.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        pidfile.unlink(missing_ok=True)
        return
    try:
        ours = str(HOME / "data") in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        ours = False  # gone
    if ours and _supervisor(pid) is not None:
        raise RuntimeError(f"e2e: another session's Docker engine (pid {pid}, started by pid {_supervisor(pid)}) "
                           f"uses {HOME}: let that session end, or stop it")
    if ours:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + SHUTDOWN_TIMEOUT + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)


def _start_dockerd(supervisor: Supervisor, state: Path) -> Path:
    _clear_earlier_engine()
    socket = state / "docker.sock"
    daemon_json = state / "daemon.json"
    # Our own settings file, so /etc/docker/daemon.json (if any) is never read.
    daemon_json.write_text(json.dumps({"features": {"buildkit": True}, "log-level": "warn"}))
    (HOME / "data").mkdir(parents=True, exist_ok=True)
    supervisor.start("dockerd", [
        str(DOCKERD), "--config-file", str(daemon_json), "--data-root", str(HOME / "data"),
        "--exec-root", str(HOME / "exec"), "--pidfile", str(HOME / "dockerd.pid"), "--host", f"unix://{socket}",
        *NETWORK_FLAGS, "--userland-proxy=false", "--shutdown-timeout", str(SHUTDOWN_TIMEOUT),
    ])
    return socket


def _registry_port() -> int:
    """The registry's port of the previous runs when it is free, else a new one (kept for the next run).

    The engine remembers which layers a registry already has by its address: at the same address, a
    later run's push of an unchanged image sends no layer, at a new one every layer again."""
    kept = HOME / "registry.port"
    if kept.exists():
        port = int(kept.read_text())
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((LOCALHOST, port))
                return port
            except OSError:
                pass
    port = free_port()
    kept.write_text(str(port))
    return port


def _start_registry(supervisor: Supervisor, state: Path) -> Registry:
    (HOME / "registry").mkdir(parents=True, exist_ok=True)
    port = _registry_port()
    config = state / "registry.yml"
    settings = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(HOME / "registry")}, "delete": {"enabled": True}},
        "http": {"addr": f"{LOCALHOST}:{port}"},
    }
    config.write_text(json.dumps(settings))  # JSON is YAML
    supervisor.start("registry", [str(REGISTRY), "serve", str(config)])
    return Registry(f"{LOCALHOST}:{port}")


def start(supervisor: Supervisor, tools: Tools, state: Path) -> Engine:
    """dockerd and the registry, started and answering; stopped with the supervisor's other programs."""
    _require_programs()
    state.mkdir(parents=True, exist_ok=True)
    engine = Engine(_start_dockerd(supervisor, state), _client_config(state, tools),
                    _start_registry(supervisor, state))

    def answering() -> bool:
        supervisor.check_running()
        if engine.docker("version", check=False, timeout=20).returncode != 0:
            return False
        try:
            engine.registry.tags("probe")
            return True
        except OSError:
            return False

    wait_for("dockerd and the registry", answering, START_TIMEOUT,
             explain=lambda: supervisor.log_tail("dockerd") + "\n" + supervisor.log_tail("registry"))
    return engine
