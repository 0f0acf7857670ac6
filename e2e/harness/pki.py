"""The control plane's keys and certificates, made with the machine's `openssl` for one run.

- one CA, which signs the apiserver's serving certificate (SANs 127.0.0.1 and
  localhost: every client reaches it there) and the webhook servers'
  certificates of the JobSet and Kueue managers (SAN 127.0.0.1: the apiserver
  calls them by a `url` client config, e2e/README.md says why);
- the service-account token signing key pair (kube-apiserver
  --service-account-signing-key-file / --service-account-key-file,
  kube-controller-manager --service-account-private-key-file);
- a static token file for the harness (system:masters) and the components.
  kube-apiserver's --token-auth-file: "token,user,uid,\"group1,group2\""
  (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#static-token-file);
- client certificates for users a test makes (`client_pair`): the apiserver's
  --client-ca-file is the CA, and a certificate's CN is the user, each O a group
  (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#x509-client-certificates).
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# The users the components authenticate as: the names the apiserver's bootstrap
# RBAC policy binds (system:kube-controller-manager, system:kube-scheduler).
COMPONENT_USERS = {
    "admin": ("e2e-admin", "system:masters"),
    "controller-manager": ("system:kube-controller-manager", ""),
    "scheduler": ("system:kube-scheduler", ""),
    "kwok": ("e2e-kwok", "system:masters"),
}


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca_cert: Path
    ca_key: Path
    apiserver_cert: Path
    apiserver_key: Path
    sa_key: Path
    sa_pub: Path
    token_file: Path
    tokens: dict[str, str]  # component -> bearer token

    def client_pair(self, user: str, groups: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """A client certificate (and its key) the apiserver authenticates as `user` in `groups`."""
        out = self.dir / "users" / user
        out.mkdir(parents=True, exist_ok=True)
        cert, key = out / "client.crt", out / "client.key"
        if not cert.exists():
            subject = f"/CN={user}" + "".join(f"/O={g}" for g in groups)
            _signed(self, cert, key, cn=subject, sans="", usage="clientAuth")
        return cert, key

    def serving_pair(self, name: str) -> tuple[Path, Path]:
        """A certificate for 127.0.0.1 signed by the CA, as controller-runtime's cert dir names them."""
        out = self.dir / name
        out.mkdir(exist_ok=True)
        cert, key = out / "tls.crt", out / "tls.key"
        if not cert.exists():
            _signed(self, cert, key, cn=name, sans="IP:127.0.0.1,DNS:localhost")
        return cert, key


def _openssl(*args: str) -> None:
    if shutil.which("openssl") is None:
        raise RuntimeError("e2e: the openssl command is required to make the control plane's certificates")
    subprocess.run(["openssl", *args], check=True, capture_output=True, text=True)


def _signed(ca, cert: Path, key: Path, cn: str, sans: str, usage: str = "serverAuth") -> None:
    """A serving certificate for `sans` (or, `usage` clientAuth, a client's: `cn` its whole subject), signed by
    `ca` (anything with ca_cert and ca_key)."""
    ca_cert, ca_key = ca.ca_cert, ca.ca_key
    csr = cert.with_suffix(".csr")
    ext = cert.with_suffix(".ext")
    names = f"subjectAltName={sans}\n" if sans else ""
    ext.write_text(f"{names}extendedKeyUsage={usage}\nkeyUsage=digitalSignature,keyEncipherment\n")
    subject = cn if cn.startswith("/") else f"/CN={cn}"
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-subj", subject,
             "-out", str(csr))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
             "-days", "2", "-extfile", str(ext), "-out", str(cert))


@dataclass(frozen=True)
class _Ca:
    ca_cert: Path
    ca_key: Path


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = directory / "ca.crt", directory / "ca.key"
    _openssl("req", "-x509", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-days", "2",
             "-subj", "/CN=gke-finetune-e2e-ca", "-out", str(ca_cert))
    apiserver_cert, apiserver_key = directory / "apiserver.crt", directory / "apiserver.key"
    _signed(_Ca(ca_cert, ca_key), apiserver_cert, apiserver_key, cn="kube-apiserver",
            sans="IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc")
    sa_key, sa_pub = directory / "sa.key", directory / "sa.pub"
    _openssl("genrsa", "-out", str(sa_key), "2048")
    _openssl("rsa", "-in", str(sa_key), "-pubout", "-out", str(sa_pub))
    tokens = {component: secrets.token_hex(16) for component in COMPONENT_USERS}
    token_file = directory / "tokens.csv"
    token_file.write_text("".join(
        f'{tokens[c]},{user},{user},"{groups}"\n' if groups else f"{tokens[c]},{user},{user}\n"
        for c, (user, groups) in COMPONENT_USERS.items()
    ))
    return Pki(directory, ca_cert, ca_key, apiserver_cert, apiserver_key, sa_key, sa_pub, token_file, tokens)
