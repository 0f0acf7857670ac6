"""Where the doctor's checks get their answers: the programs on this machine and the APIs, live, or a file
of answers recorded earlier (`--answers`), which is how the checks are tested offline.

An answer is what a command printed (exit code, stdout, stderr) or what an HTTP request returned (status,
body). Live, each is recorded under its key (the command line, the GET's URL, or `POST <url> <body>`);
`--record <file>` writes them out, with every access token and Hugging Face token replaced, so a file can
be shared. Nothing here writes anywhere but that file: GETs, commands that read, and POSTs only to
methods that read (`post` refuses any other: testIamPermissions answers which permissions a caller holds).

A request may name a user project (`x-goog-user-project`, Google's system parameter:
https://cloud.google.com/apis/docs/system-parameters): client-based APIs such as Cloud Quotas charge
and authorize the call against that project, which user credentials do not name by themselves
(https://cloud.google.com/docs/quotas/set-quota-project).
A Kubernetes API read returns (status, body) too (`kube`, by a key that names the read), and so does a
SelfSubjectAccessReview (a question to the API server that it answers and stores nowhere).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

TIMEOUT_S = 30
HIDDEN = "[redacted]"
# The only methods `post` sends: they read (which of these permissions does the caller hold?).
READ_ONLY_POSTS = (":testIamPermissions",)


def post_key(url: str, body: object) -> str:
    """How a POST is recorded: its URL and its body, so that two questions to one URL stay apart."""
    return f"POST {url} {json.dumps(body, sort_keys=True, separators=(',', ':'))}"


def _headers(token: str, user_project: str) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if user_project:
        headers["x-goog-user-project"] = user_project
    return headers


def _read_only(url: str) -> None:
    if not url.endswith(READ_ONLY_POSTS):
        raise ValueError(f"the doctor only reads: no POST to {url}")
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

    def get(self, url: str, token: str = "", user_project: str = "") -> Got:
        if url not in self.requests:
            return Got(0, None, f"no answer recorded for GET {url}")
        return Got(**self.requests[url])

    def post(self, url: str, body: object, token: str = "", user_project: str = "") -> Got:
        _read_only(url)
        key = post_key(url, body)
        if key not in self.requests:
            return Got(0, None, f"no answer recorded for {key}")
        return Got(**self.requests[key])


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

    def get(self, url: str, token: str = "", user_project: str = "") -> Got:
        import requests  # pylint: disable=import-outside-toplevel

        self.hide(token)
        got = self._answer(lambda: requests.get(url, headers=_headers(token, user_project), timeout=TIMEOUT_S))
        self.requests[url] = asdict(got)
        return got

    def post(self, url: str, body: object, token: str = "", user_project: str = "") -> Got:
        import requests  # pylint: disable=import-outside-toplevel

        _read_only(url)
        self.hide(token)
        got = self._answer(lambda: requests.post(url, json=body, headers=_headers(token, user_project),
                                                 timeout=TIMEOUT_S))
        self.requests[post_key(url, body)] = asdict(got)
        return got

    @staticmethod
    def _answer(send) -> Got:
        import requests  # pylint: disable=import-outside-toplevel

        try:
            resp = send()
        except requests.RequestException as err:
            return Got(0, None, f"{type(err).__name__}: {err}")
        try:
            body = resp.json()
        except ValueError:
            body = resp.text[:2000]
        return Got(resp.status_code, body)

    def record(self, path: Path) -> None:
        text = json.dumps({"commands": self.commands, "requests": self.requests, "kubernetes": self.kube_answers},
                          indent=1, sort_keys=True)
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, HIDDEN)
        Path(path).write_text(text + "\n")
