"""Where the doctor's checks get their answers: the programs on this machine and the APIs, live, or a file
of answers recorded earlier (`--answers`), which is how the checks are tested offline.

An answer is what a command printed (exit code, stdout, stderr), what an HTTP GET returned (status,
body), or what a Kubernetes API read returned (status, body: `kube`, by a key that names the read).
Live, each is recorded under its key (`$ <argv>`, `GET <url>`, the read's key); `--record <file>` writes
them out, with every access token and Hugging Face token replaced, so a file can be shared. Nothing here
writes anywhere but that file: only GETs, commands that read, and SelfSubjectAccessReviews (a question
to the API server that it answers and stores nowhere).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

TIMEOUT_S = 30
HIDDEN = "[redacted]"
# Seconds to connect to a Kubernetes API server and to read an answer: one that doesn't answer is said soon.
KUBE_TIMEOUT = (5, 15)


@dataclass(frozen=True)
class Ran:
    code: int  # 127: not found
    stdout: str = ""
    stderr: str = ""


@dataclass(frozen=True)
class Got:
    status: int  # 0: no answer (network, DNS)
    body: object = None  # JSON, or text
    error: str = ""


@dataclass(frozen=True)
class Asked:
    """A Kubernetes API read: its HTTP status (0: no answer, or no client for the cluster) and its body."""

    status: int
    body: object = None
    error: str = ""


class Recorded:
    """Answers from a file written by `--record` (or by hand, as the tests' are)."""

    def __init__(self, path: Path):
        data = json.loads(Path(path).read_text())
        self.commands, self.requests = data.get("commands", {}), data.get("requests", {})
        self.kube_answers = data.get("kubernetes", {})

    def kube(self, key: str, ask, connect=None) -> Asked:  # noqa: ARG002 (Live's signature)
        if key not in self.kube_answers:
            return Asked(0, None, f"no answer recorded for {key}")
        return Asked(**self.kube_answers[key])

    def run(self, argv: list[str]) -> Ran:
        key = " ".join(argv)
        if key not in self.commands:
            return Ran(127, "", f"{argv[0]}: not found (no answer recorded for `{key}`)")
        return Ran(**self.commands[key])

    def get(self, url: str, token: str = "") -> Got:
        if url not in self.requests:
            return Got(0, None, f"no answer recorded for GET {url}")
        return Got(**self.requests[url])


class Live:
    """The programs on PATH and the APIs over HTTPS; every answer kept for `--record`."""

    def __init__(self):
        self.commands: dict[str, dict] = {}
        self.requests: dict[str, dict] = {}
        self.kube_answers: dict[str, dict] = {}
        self.secrets: set[str] = set()
        self._clients: dict[str, object] = {}

    def kube(self, key: str, ask, connect) -> Asked:
        """`ask(api client)` of the cluster `connect()` gives a client for (built once), recorded under `key`."""
        from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel

        try:
            if "client" not in self._clients:
                self._clients["client"] = connect()
            api = self._clients["client"]
            asked = Asked(200, api.sanitize_for_serialization(ask(api)))
        except ApiException as err:
            asked = Asked(err.status or 0, None, f"{err.status} {err.reason}")
        except Exception as err:  # noqa: BLE001 (no kubeconfig context, no answer: said as the check's detail)
            asked = Asked(0, None, f"{type(err).__name__}: {err}")
        self.kube_answers[key] = asdict(asked)
        return asked

    def run(self, argv: list[str]) -> Ran:
        if shutil.which(argv[0]) is None:
            ran = Ran(127, "", f"{argv[0]}: not found on PATH")
        else:
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
                ran = Ran(done.returncode, done.stdout, done.stderr)
            except subprocess.TimeoutExpired:
                ran = Ran(124, "", f"`{' '.join(argv)}` did not answer within {TIMEOUT_S} s")
        self.commands[" ".join(argv)] = asdict(ran)
        return ran

    def hide(self, secret: str) -> None:
        """A value never to be written to a recording (a token this run read)."""
        if secret:
            self.secrets.add(secret)

    def get(self, url: str, token: str = "") -> Got:
        import requests  # pylint: disable=import-outside-toplevel

        self.hide(token)
        try:
            resp = requests.get(url, headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=TIMEOUT_S)
        except requests.RequestException as err:
            got = Got(0, None, f"{type(err).__name__}: {err}")
        else:
            try:
                body = resp.json()
            except ValueError:
                body = resp.text[:2000]
            got = Got(resp.status_code, body)
        self.requests[url] = asdict(got)
        return got

    def record(self, path: Path) -> None:
        text = json.dumps({"commands": self.commands, "requests": self.requests, "kubernetes": self.kube_answers},
                          indent=1, sort_keys=True)
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, HIDDEN)
        Path(path).write_text(text + "\n")
