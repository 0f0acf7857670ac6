"""No traceback reaches a user: every command is fed the inputs people type and a few they shouldn't (stack files
and arguments, a fuzzer over both, seeded and bounded), and answers each with a message naming the file, the key
or the argument and an exit code of README.md's table, `--json` with JSON; nothing stored changes.

A command is one line of COMMANDS: its `python -m` module (whose `main(argv)` is what the user runs, through
tools/cli.py `guarded`) and its arguments, `{stack}`, `{root}`, `{out}` and `{answers}` filled in here. The
preview is the program itself under the SDK's mocks: what `pulumi preview` prints of an error is the program's
RunError text (e2e/tests/test_stack_file_reading.py shows it with the real CLI).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import importlib
import io
import json
import os
import random
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pytest
import yaml

from stack.problems import ConfigError
from tests.support.checkout import linked_checkout
from tools import offline

ROOT = Path(__file__).resolve().parents[2]
STACK = "fuzz"
FILE = f"Pulumi.{STACK}.yaml"


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # python -m <module>
    argv: tuple[str, ...]
    json: bool = False  # --json: errors come as JSON on stdout


COMMANDS = (
    Command("plan", "tools.plan", ("show", "--stack", "{stack}", "--root", "{root}", "--out", "{out}")),
    Command("handoff", "tools.plan", ("handoff", "--stack", "{stack}", "--root", "{root}", "--out", "{out}")),
    Command("status", "tools.status", ("show", "--stack", "{stack}", "--root", "{root}")),
    Command("status --json", "tools.status", ("show", "--stack", "{stack}", "--root", "{root}", "--json"), json=True),
    Command("logs", "tools.runs", ("logs", "--stack", "{stack}", "--root", "{root}")),
    Command("cancel", "tools.runs", ("cancel", "--stack", "{stack}", "--root", "{root}")),
    Command("resume", "tools.runs", ("resume", "--stack", "{stack}", "--root", "{root}")),
    Command("inspect", "tools.runs", ("inspect", "--stack", "{stack}", "--root", "{root}", "--out", "{out}")),
    Command("wait", "tools.runs", ("wait", "--stack", "{stack}", "--root", "{root}", "--timeout", "1")),
    Command("doctor", "tools.doctor", ("--stack", "{stack}", "--root", "{root}", "--answers", "{answers}")),
    Command("plan json", "tools.plan", ("json", "--stack", "{stack}", "--root", "{root}")),
    Command("migrate", "tools.migrate", ("--stack", "{stack}", "--root", "{root}")),
    Command("download", "tools.model", ("download", "--stack", "{stack}", "--root", "{root}", "--dir", "{out}")),
)


def documented_codes() -> set[int]:
    """The exit codes of README.md's table (its one home)."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("**Exit codes.**"):]
    table = table[:table.index("\n\n", table.index("| code |"))]
    return {int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)}


CODES = documented_codes()
BUG = 70  # documented, and never the answer to any input


@dataclass
class Answer:
    code: int
    out: str
    err: str

    @property
    def said(self) -> str:
        return self.out + self.err


def _entry(module: str):
    try:
        return importlib.import_module(f"{module}.__main__").main
    except ModuleNotFoundError:
        return importlib.import_module(module).main


def run(command: Command, argv: list[str]) -> Answer:
    """The command as a user runs it, in this process: its exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    cwd, path = os.getcwd(), list(sys.path)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = _entry(command.module)(argv)
            except SystemExit as stop:  # argparse: 2 and its usage line
                code = stop.code if isinstance(stop.code, int) else 1
    finally:
        os.chdir(cwd)
        sys.path[:] = path
    return Answer(code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    where = tmp_path_factory.mktemp("fuzz")
    root = linked_checkout(where)
    (where / "answers.json").write_text("{}\n")
    (where / "out").mkdir()
    (where / "out" / "notes.yaml").write_text("the user's own file\n")
    return root


class _NoBucket(http.server.BaseHTTPRequestHandler):
    """Cloud Storage as an emulator on 127.0.0.1 that has no bucket: every request a 404 with the JSON API's error
    body (https://cloud.google.com/storage/docs/json_api/v1/status-codes), which the client does not retry."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = json.dumps({"error": {"code": 404, "message": "The specified bucket does not exist."}}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PUT = do_DELETE = do_GET

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture(scope="module")
def no_bucket():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoBucket)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def no_cluster_no_cli(monkeypatch, tmp_path, no_bucket):
    """No kubeconfig context, no Pulumi CLI, no bucket: the commands stop there, having said so. Cloud Storage is
    the emulator above (google-cloud-storage's STORAGE_EMULATOR_HOST, anonymous credentials), and Google's
    metadata server a closed port on 127.0.0.1: nothing leaves this machine."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    monkeypatch.delenv("GKE_FINETUNE_TRACEBACK", raising=False)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", no_bucket)
    for name in ("GCE_METADATA_HOST", "GCE_METADATA_IP"):  # google/auth/environment_vars.py
        monkeypatch.setenv(name, "127.0.0.1:9")
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-credentials.json"))


def _argv(command: Command, root: Path, stack: str = STACK) -> list[str]:
    fill = {"{stack}": stack, "{root}": str(root), "{out}": str(root.parent / "out"),
            "{answers}": str(root.parent / "answers.json")}
    return [fill.get(a, a) for a in command.argv]


def _stored(root: Path) -> dict[str, str]:
    """What must stay as it was: every stack file of the checkout and the user's file in the output folder."""
    files = sorted(root.glob("Pulumi.*.yaml")) + [root.parent / "out" / "notes.yaml"]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def check(answer: Answer, command: Command, names: tuple[str, ...]) -> None:
    where = f"{command.name}: exit {answer.code}\n{answer.said[-2000:]}"
    assert answer.code in CODES and answer.code != BUG, where
    assert "Traceback" not in answer.said, where
    if answer.code == 0:
        return
    assert any(n in answer.said for n in names), f"names none of {names}: {where}"
    if command.json:
        last = json.loads(answer.out.strip().splitlines()[-1])
        assert last["code"] == answer.code and last["error"], where


def preview(root: Path) -> str | None:
    """The program as `pulumi preview` runs it: None, or the text of its RunError (all a user sees). A file the
    CLI itself can't read, it refuses before any program runs: here the offline engine's reading (the loader's,
    stricter where the two would differ) stands for it."""
    try:
        offline.stack_config(STACK, root=root)
    except ConfigError as err:
        return str(err)
    try:
        offline.run_stack(STACK, root=root, preview=True)
    except pulumi.RunError as err:
        return str(err)
    return None


def feed(root: Path, text: bytes, names: tuple[str, ...], commands=COMMANDS, with_preview: bool = True) -> None:
    (root / FILE).write_bytes(text)
    before = _stored(root)
    for command in commands:
        check(run(command, _argv(command, root)), command, names)
        assert _stored(root) == before, f"{command.name} changed what is stored"
    if with_preview:
        said = preview(root)
        assert said is None or any(n in said for n in names), said


# --- the probe's stack files, and more of the same kind -------------------------------------------------------

DEV = (ROOT / "Pulumi.dev.yaml").read_text()


def _with(after: str, new: str, base: str = DEV) -> bytes:
    assert after in base
    return base.replace(after, after + new, 1).encode()


PROBES = {
    "namespace 12345": (_with("  gcp:region: us-east5", "\n  gke-finetune:namespace: 12345"), ("namespace",)),
    "namespace null": (_with("  gcp:region: us-east5", "\n  gke-finetune:namespace:"), ("namespace",)),
    "suspend: yes": (_with("      profile: true", "\n      suspend: yes"), (f"{FILE}:33:16",)),
    "duplicate key": (_with("      profile: true", "\n      profile: false"), (f"{FILE}:33:7",)),
    "merge key under a run": (_with("      profile: true", "\n      <<: {name: other}"), (f"{FILE}:33:7",)),
    "merge of a list": (_with("      profile: true", "\n      <<: [1, 2]"), (f"{FILE}:33:7",)),
    "not UTF-8": (DEV.encode().replace(b"my-project-id", b"my-proj\xe9ct-id"), (f"{FILE}:6:",)),
    "alias bomb": (DEV.encode() + b"x: &a [a,a,a,a,a,a,a,a,a]\n" + b"".join(
        f"x{i}: &a{i} [{','.join(['*a' if i == 0 else f'*a{i - 1}'] * 9)}]\n".encode() for i in range(8)),
        ("expands to more than",)),
    "path out of the checkout": (_with("  gke-finetune:datasets:\n", "    - {name: env, path: /proc/self/environ}\n"),
                                 ("datasets[0].path",)),
    "nested template field": (_with("      profile: true", "\n      format: prompt-completion\n"
                                    "      promptTemplate: '{q:{w}}'"), ("promptTemplate",)),
    "a secret in env": (_with("      profile: true", "\n      env: {WANDB_API_KEY: abc123}"), ("WANDB_API_KEY",)),
    "a 128 KiB argument": (_with('--datacount, "355120"', ', "' + "x" * 131072 + '"'), ("args[6]",)),
    "empty": (b"", ("gcp:project",)),
    "a list": (b"- a\n- b\n", (f"{FILE}:1:1",)),
    "config a list": (b"config: [a]\n", (FILE,)),
    "BOM and CRLF": (b"\xef\xbb\xbf" + DEV.replace("\n", "\r\n").encode(), ("fuzz",)),
    "a tab": (DEV.replace("  gcp:region", "\tgcp:region").encode(), (f"{FILE}:7:",)),
}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_the_probes_stack_files_get_a_message_and_a_documented_code(tree, probe):
    text, names = PROBES[probe]
    feed(tree, text, names)


def test_a_read_only_stack_file_is_left_as_it_is(tree):
    (tree / FILE).write_bytes(DEV.encode())
    (tree / FILE).chmod(0o444)
    try:
        for name in ("cancel", "resume"):
            [command] = [c for c in COMMANDS if c.name == name]
            edit_only = Command(name, command.module, (*command.argv, "--edit-only"))
            answer = run(edit_only, _argv(edit_only, tree))
            check(answer, edit_only, ("read-only", "already"))
        assert (tree / FILE).read_bytes() == DEV.encode()
    finally:
        (tree / FILE).chmod(0o644)


# Values people type where another kind belongs, and a few they shouldn't.
WEIRD = [12345, -1, 0, 1.5, None, True, "yes", "", " ", "a\n", "x" * 300, "../../etc/passwd", "/proc/self/environ",
         "{q:{w}}", "é", "\u202e", [], ["a", 1], {}, {"a": {"b": None}}, "2024-01-05", "0o17", "1e3", "*", "${HOME}"]
RUN_KEYS = ["name", "trainer", "pool", "args", "env", "suspend", "profile", "data", "image", "format",
            "promptTemplate", "systemPrompt", "columns", "maxRestarts", "chipsPerHost", "ladder", "command", "hfToken",
            "runAs", "model", "weights", "export", "eval", "priority", "revision", "loss", "<<"]
TOP_KEYS = ["gke-finetune:namespace", "gke-finetune:zones", "gke-finetune:pools", "gke-finetune:runs",
            "gke-finetune:datasets", "gke-finetune:mode", "gcp:project", "gcp:region", "gke-finetune:existingCluster",
            "gke-finetune:deletionProtection", "gke-finetune:systemNodeCount", "gke-finetune:hfToken",
            "gke-finetune:bucketName", "gke-finetune:network", "gke-finetune:imageBuild", "gke-finetune:shapes",
            "gke-finetune:charts", "gke-finetune:createNamespace", "gke-finetune:hfTokenSecret"]
# A fixed seed, so that every run feeds the same cases; FUZZ_SEED=<n> explores others.
SEED, CASES = int(os.environ.get("FUZZ_SEED", "20261205")), 24


def _mutants() -> list[tuple[str, bytes, tuple[str, ...]]]:
    """Seeded mutations of the shipped stack files: a value of another kind at a run's or the stack's key, or
    the text itself cut, doubled or spliced."""
    rng, found = random.Random(SEED), []
    texts = {s: (ROOT / f"Pulumi.{s}.yaml").read_text() for s in ("dev", "tpu-queued", "a4", "existing-dev")}
    for i in range(CASES):
        stack = rng.choice(sorted(texts))
        text = texts[stack]
        kind = rng.choice(["run", "top", "text"])
        if kind == "text":
            lines = text.splitlines(keepends=True)
            at = rng.randrange(len(lines))
            how = rng.choice(["cut", "double", "splice"])
            lines = lines[:at] if how == "cut" else lines[:at + 1] + lines[at:] if how == "double" else \
                lines[:at] + [rng.choice(["  : x\n", "- -\n", "  &a *b\n", "\x00\n", "  key: [\n", "{\n"])] + lines[at:]
            found.append((f"{i} {stack} {how} line {at + 1}", "".join(lines).encode(), ("fuzz",)))
            continue
        data = yaml.safe_load(text)
        value = rng.choice(WEIRD)
        if kind == "top":
            key = rng.choice(TOP_KEYS)
            data["config"][key] = value
            names = (key.split(":", 1)[1], key, FILE)
        else:
            key = rng.choice(RUN_KEYS)
            data["config"]["gke-finetune:runs"][0][key] = value
            names = (f"runs[0].{key}", f"runs[0]", FILE, "runs")
        found.append((f"{i} {stack} {kind} {key}={value!r}"[:80], json.dumps(data, indent=1).encode(), names))
    return found


MUTANTS = _mutants()


@pytest.mark.parametrize("case", range(len(MUTANTS)), ids=[m[0] for m in MUTANTS])
def test_a_fuzzed_stack_file_gets_a_message_and_a_documented_code(tree, case):
    _, text, names = MUTANTS[case]
    feed(tree, text, (*names, "fuzz"))


# --- arguments ------------------------------------------------------------------------------------------------

BAD_ARGS = [
    ("--stack", "nosuch", ("nosuch",)), ("--stack", "../../etc/passwd", ("--stack",)), ("--stack", "", ("--stack",)),
    ("--stack", "dev\n", ("--stack",)), ("--stack", "x" * 101, ("--stack",)), ("--stack", "a/b", ("--stack",)),
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c.name for c in COMMANDS])
@pytest.mark.parametrize("flag, value, names", BAD_ARGS, ids=[f"{f}={v[:12]!r}" for f, v, _ in BAD_ARGS])
def test_a_bad_stack_argument_is_named(tree, command, flag, value, names):
    (tree / FILE).write_bytes(DEV.encode())
    argv = _argv(command, tree)
    argv[argv.index(flag) + 1] = value
    check(run(command, argv), command, names)


RUNS = ("logs", "cancel", "resume", "inspect", "wait")
EXTRA_ARGS = [
    ("status", ["--watch", "abc"], ("--watch",)), ("status", ["--watch", "-1"], ("--watch",)),
    ("status", ["--watch", "nan"], ("--watch",)), ("status --json", ["--watch", "inf"], ("--watch",)),
    ("status", ["--run", "nosuch"], ("nosuch",)), ("status --json", ["--run", "nosuch"], ("nosuch",)),
    ("status", ["--from-json", "/nonexistent"], ("/nonexistent",)),
    ("logs", ["--pod", "x"], ("--pod", "POD")), ("logs", ["--pod", "99"], ("--pod", "POD", "99")),
    ("logs", ["--tail", "-5"], ("--tail",)), ("logs", ["--tail", "abc"], ("--tail",)),
    ("wait", ["--timeout", "-1"], ("--timeout",)), ("wait", ["--timeout", "abc"], ("--timeout",)),
    ("inspect", ["--out", "/proc/nope"], ("/proc/nope", "fuzz")),
    ("doctor", ["--answers", "/nonexistent/answers.json"], ("--answers",)),
    ("doctor", ["--record", "/proc/nope/x.json"], ("--record", "fuzz")),
    ("plan", ["--root", "/nonexistent"], ("--root",)), ("plan", ["--out", "/proc/nope"], ("/proc/nope",)),
    ("handoff", ["--out", "/proc/nope"], ("/proc/nope", "fuzz")),
    ("migrate", ["--run", "nosuch"], ("nosuch",)), ("migrate", ["--run", "a\nb"], ("a\\nb",)),
    ("download", ["--run", "a\nb"], ("a\\nb",)),
    *((name, ["--run", "nosuch"], ("nosuch",)) for name in RUNS),
    *((name, ["--run", "a\nb"], ("a\\nb", "--run")) for name in RUNS),
    *((name, ["--context", "nosuch"], ("nosuch", "fuzz")) for name in RUNS),
]


@pytest.mark.parametrize("name, extra, names", EXTRA_ARGS, ids=[f"{n} {' '.join(e)[:24]}" for n, e, _ in EXTRA_ARGS])
def test_a_bad_argument_is_named(tree, name, extra, names):
    (tree / FILE).write_bytes(DEV.encode())
    [command] = [c for c in COMMANDS if c.name == name]
    argv = _argv(command, tree)
    flag = extra[0]
    if flag in argv:  # replace its value
        argv[argv.index(flag) + 1] = extra[1]
    else:
        argv += extra
    before = _stored(tree)
    check(run(command, argv), command, names)
    assert _stored(tree) == before


def test_a_broken_kubeconfig_is_a_message(tree, tmp_path, monkeypatch):
    (tree / FILE).write_bytes(DEV.encode())
    for content in (b"{[", b"\xff\xfe", b"- a list\n", b"apiVersion: v1\ncontexts: 5\n"):
        (tmp_path / "kubeconfig").write_bytes(content)
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
        for command in COMMANDS:
            if command.name in ("status", "status --json", "logs", "inspect", "wait"):
                check(run(command, _argv(command, tree)), command, ("kubeconfig", "fuzz"))


def test_the_backend_command_names_each_bad_argument():
    command = Command("backend", "tools.backend", ())
    for argv, names in ((["setup", "--project", "X", "--location", "us"], ("--project",)),
                        (["setup", "--project", "my-project-id", "--location", "u s"], ("--location",)),
                        (["setup", "--project", "my-project-id", "--location", "us", "--bucket", "a..b"], ("--bucket",)),
                        (["setup", "--project", "my-project-id", "--location", "us", "--team", "bob"], ("--team",)),
                        (["check", "--url", "file://x"], ("PULUMI_BACKEND_URL",)), (["nope"], ("invalid choice",))):
        check(run(command, argv), command, names)


@pytest.mark.parametrize("name, code", [("migrate", 1), ("download", 69)])
def test_a_bucket_that_does_not_answer_is_a_message(tree, name, code):
    """The stack file is fine, the bucket isn't there (the emulator's 404): one line naming gs://<bucket>."""
    (tree / FILE).write_bytes(DEV.encode())
    [command] = [c for c in COMMANDS if c.name == name]
    out = tree.parent / "out"
    before, listed = _stored(tree), sorted(out.iterdir())
    answer = run(command, _argv(command, tree))
    check(answer, command, ("gs://",))
    assert answer.code == code and "does not exist" in answer.err, answer.said
    assert _stored(tree) == before and sorted(out.iterdir()) == listed


def test_generate_names_each_bad_argument(tmp_path):
    """`make generate` reads no stack: its directory and its numbers, each refused by name before any model."""
    command = Command("generate", "tools.model", ())
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "bad-marker").mkdir()
    (tmp_path / "bad-marker" / "export_complete.json").write_text("{not json")
    (tmp_path / "old-marker").mkdir()
    (tmp_path / "old-marker" / "export_complete.json").write_text('{"schema": 0, "files": []}')
    (tmp_path / "missing").mkdir()
    (tmp_path / "missing" / "export_complete.json").write_text('{"schema": 1, "files": {"model.safetensors": 5}}')
    base = ["generate", "--prompt", "hi"]
    for argv, code, names in (
            ([*base, "--dir", str(tmp_path / "nowhere")], 66, ("nowhere",)),
            ([*base, "--dir", str(tmp_path / "a-file")], 66, ("a-file",)),
            ([*base, "--dir", str(tmp_path / "bad-marker")], 66, ("bad-marker",)),
            ([*base, "--dir", str(tmp_path / "old-marker")], 66, ("old-marker",)),
            ([*base, "--dir", str(tmp_path / "missing")], 66, ("model.safetensors",)),
            ([*base, "--dir", ".", "--max-new-tokens", "0"], 2, ("--max-new-tokens",)),
            ([*base, "--dir", ".", "--max-new-tokens", "-3"], 2, ("--max-new-tokens",)),
            ([*base, "--dir", ".", "--device", "gpu"], 2, ("--device",)),
            (["generate", "--dir", "."], 2, ("--prompt",))):
        answer = run(command, argv)
        check(answer, command, names)
        assert answer.code == code, answer.said


def test_download_names_each_bad_argument(tree):
    (tree / FILE).write_bytes(DEV.encode())
    [command] = [c for c in COMMANDS if c.name == "download"]
    for extra, names in ((["--checkpoint", "-1"], ("--checkpoint",)), (["--checkpoint", "x"], ("--checkpoint",)),
                         (["--run", "nosuch"], ("nosuch",))):
        answer = run(command, _argv(command, tree) + extra)
        check(answer, command, names)
        assert answer.code in (2, 66), answer.said
