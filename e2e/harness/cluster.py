"""The control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok.

Every port is picked free on 127.0.0.1 by the kernel (bind to port 0) just
before the program that listens on it starts. The apiserver keeps its default
admission plugins (PodSecurity, ServiceAccount, Priority, the webhooks, ...:
none is enabled or disabled here), authorizes with Node,RBAC, and signs
service-account tokens with keys made for this run (pki.py). Its endpoint
reconciler is off: the `kubernetes` Service's Endpoints would name the
advertise address, and the apiserver refuses a loopback address there.
kwok plays the kubelet of every node (--manage-all-nodes), with the stages
of stages.py, and serves its kubelet API at the nodes' address (127.0.0.1,
kwok's port), which the apiserver reaches by the nodes' InternalIP; with
`serve_logs`, the container logs pod_logs.py gives it.
"""

from __future__ import annotations

import json
import socket
import ssl
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from e2e.harness.kube import Kube, wait_for
from e2e.harness.pki import Pki, make_pki
from e2e.harness.pod_logs import install_logs_api
from e2e.harness.processes import Supervisor
from e2e.harness.stages import write_kwok_config
from e2e.harness.tools import Tools

LOCALHOST = "127.0.0.1"
START_TIMEOUT = 120.0
# Data only: no traffic is ever sent to these addresses (Service ClusterIPs, pod IPs).
SERVICE_CIDR = "10.96.0.0/16"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOCALHOST, 0))
        return s.getsockname()[1]


@dataclass
class ControlPlane:
    state: Path
    tools: Tools
    supervisor: Supervisor
    pki: Pki | None = None
    ports: dict[str, int] = field(default_factory=dict)
    serve_logs: bool = False  # kwok serves pods' logs from files (pod_logs.py)
    # Flags added to a program's own (program name -> flags): the scale benchmark's client rates.
    extra_args: dict[str, list[str]] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return f"https://{LOCALHOST}:{self.ports['apiserver']}"

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    def client(self, user: str = "admin") -> Kube:
        return Kube(self.server, self.pki.tokens[user], str(self.pki.ca_cert))

    def write_kubeconfig(self, path: Path, token: str, user: str) -> Path:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {"server": self.server,
                                                     "certificate-authority": str(self.pki.ca_cert)}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        }
        path.write_text(json.dumps(config, indent=1))  # JSON is YAML: every client reads it
        return path

    def user_kubeconfig(self, path: Path, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig (context `e2e`) in which `user` authenticates by a client certificate of the CA."""
        cert, key = self.pki.client_pair(user, groups)
        config = json.loads(self.write_kubeconfig(path, "", user).read_text())
        config["users"] = [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}]
        path.write_text(json.dumps(config, indent=1))
        return path

    # --- the programs ------------------------------------------------------------------------
    def start(self) -> None:
        self.pki = make_pki(self.state / "pki")
        self._etcd()
        self._apiserver()
        self.write_kubeconfig(self.kubeconfig, self.pki.tokens["admin"], "admin")
        self._controller_manager()
        self._scheduler()
        if self.serve_logs:
            install_logs_api(self.client())
        self._kwok()

    def _etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.ports["etcd"] = client
        self.supervisor.start("etcd", [
            str(self.tools.bin("etcd")), "--name", "e2e", "--data-dir", str(self.state / "etcd"),
            "--listen-client-urls", f"http://{LOCALHOST}:{client}",
            "--advertise-client-urls", f"http://{LOCALHOST}:{client}",
            "--listen-peer-urls", f"http://{LOCALHOST}:{peer}",
            "--initial-advertise-peer-urls", f"http://{LOCALHOST}:{peer}",
            "--initial-cluster", f"e2e=http://{LOCALHOST}:{peer}",
            # A throwaway store on a shared disk: durability buys nothing here.
            "--unsafe-no-fsync", "--log-level", "warn",
        ])
        wait_for("etcd", lambda: _http_ok(f"http://{LOCALHOST}:{client}/health"), START_TIMEOUT,
                 explain=lambda: self.supervisor.log_tail("etcd"))

    def _apiserver(self) -> None:
        port = free_port()
        self.ports["apiserver"] = port
        pki = self.pki
        self.supervisor.start("kube-apiserver", [
            str(self.tools.bin("kube-apiserver")),
            f"--etcd-servers=http://{LOCALHOST}:{self.ports['etcd']}",
            f"--bind-address={LOCALHOST}", f"--advertise-address={LOCALHOST}", f"--secure-port={port}",
            f"--tls-cert-file={pki.apiserver_cert}", f"--tls-private-key-file={pki.apiserver_key}",
            f"--client-ca-file={pki.ca_cert}", f"--token-auth-file={pki.token_file}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=Node,RBAC",
            "--endpoint-reconciler-type=none", f"--cert-dir={self.state / 'apiserver'}",
            # A node's kubelet (kwok's server) is at its InternalIP; its Hostname, the default first choice,
            # resolves nowhere here.
            "--kubelet-preferred-address-types=InternalIP",
            "--profiling=false", "--v=1", *self.extra_args.get("kube-apiserver", []),
        ])
        kube = self.client()
        wait_for("kube-apiserver /readyz", kube.healthy, START_TIMEOUT,
                 explain=lambda: self._check_and_tail("kube-apiserver"))

    def _controller_manager(self) -> None:
        port = free_port()
        self.ports["controller-manager"] = port
        kubeconfig = self.write_kubeconfig(self.state / "controller-manager.kubeconfig",
                                           self.pki.tokens["controller-manager"], "controller-manager")
        self.supervisor.start("kube-controller-manager", [
            str(self.tools.bin("kube-controller-manager")), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            f"--bind-address={LOCALHOST}", f"--secure-port={port}", f"--cert-dir={self.state / 'kcm'}",
            f"--service-account-private-key-file={self.pki.sa_key}", f"--root-ca-file={self.pki.ca_cert}",
            "--use-service-account-credentials=true", "--leader-elect=false", "--v=1",
            *self.extra_args.get("kube-controller-manager", []),
        ])
        wait_for("kube-controller-manager /healthz", lambda: https_ok(port), START_TIMEOUT,
                 explain=lambda: self._check_and_tail("kube-controller-manager"))

    def _scheduler(self) -> None:
        port = free_port()
        self.ports["scheduler"] = port
        kubeconfig = self.write_kubeconfig(self.state / "scheduler.kubeconfig", self.pki.tokens["scheduler"],
                                           "scheduler")
        self.supervisor.start("kube-scheduler", [
            str(self.tools.bin("kube-scheduler")), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            f"--bind-address={LOCALHOST}", f"--secure-port={port}", f"--cert-dir={self.state / 'scheduler'}",
            "--leader-elect=false", "--v=1", *self.extra_args.get("kube-scheduler", []),
        ])
        wait_for("kube-scheduler /healthz", lambda: https_ok(port), START_TIMEOUT,
                 explain=lambda: self._check_and_tail("kube-scheduler"))

    def _kwok(self) -> None:
        port = free_port()
        self.ports["kwok"] = port
        kubeconfig = self.write_kubeconfig(self.state / "kwok.kubeconfig", self.pki.tokens["kwok"], "kwok")
        config = write_kwok_config(self.state / "kwok.yaml", self.tools.kwok_stages())
        self.supervisor.start("kwok", [
            str(self.tools.bin("kwok")), f"--kubeconfig={kubeconfig}", f"--config={config}",
            "--manage-all-nodes=true", f"--node-ip={LOCALHOST}", f"--server-address={LOCALHOST}:{port}",
            f"--node-port={port}", "--node-lease-duration-seconds=40",
            *(["--enable-crds=Logs"] if self.serve_logs else []), *self.extra_args.get("kwok", []),
        ], env={"HOME": str(self.state)})  # kwok reads ~/.kwok/kwok.yaml first: keep the user's out

    def _check_and_tail(self, name: str) -> str:
        self.supervisor.check_running()
        return self.supervisor.log_tail(name)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def https_ok(port: int) -> bool:
    # The component serves a self-signed certificate of its own (--cert-dir); /healthz is
    # one of its --authorization-always-allow-paths.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://{LOCALHOST}:{port}/healthz", context=context, timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False
