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


class Recorded:
    """Answers from a file written by `--record` (or by hand, as the tests' are)."""

    def __init__(self, path: Path):
        data = json.loads(Path(path).read_text())
        self.commands, self.requests = data.get("commands", {}), data.get("requests", {})

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
        self.secrets: set[str] = set()

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
        text = json.dumps({"commands": self.commands, "requests": self.requests}, indent=1, sort_keys=True)
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, HIDDEN)
        Path(path).write_text(text + "\n")
