"""`make cancel` / `make resume`: the stack file edited in place, one line, comments and layout kept, read back
the same but for the run's `suspend`; the targeted `pulumi up` names the run's JobSet by the URN the program
gives it."""

from __future__ import annotations

import difflib
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from core.names import PROJECT
from tests.support.pulumi_harness import ROOT, run_stack
from tools import stacks
from tools.runs.suspend import RUNS_KEY, EditError, _check, apply_command, edit

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


def _stack_runs() -> list[tuple[str, str]]:
    out = []
    for stack in stacks.shipped(ROOT):
        runs = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"].get(RUNS_KEY) or []
        out += [(stack, r["name"]) for r in runs]
    return out


def _changed(old: str, new: str) -> list[str]:
    return [line for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


@pytest.mark.parametrize("stack,run", _stack_runs())
def test_cancel_adds_one_line_and_resume_gives_the_file_back(stack, run):
    path = ROOT / f"Pulumi.{stack}.yaml"
    original = path.read_text()
    cancelled = edit(original, path, run, suspend=True)
    assert cancelled.changed
    [added] = _changed(original, cancelled.text)
    assert added.strip() == "+suspend: true" or added.strip().endswith("suspend: true")
    entry = next(r for r in yaml.safe_load(cancelled.text)["config"][RUNS_KEY] if r["name"] == run)
    assert entry["suspend"] is True
    assert cancelled.text.splitlines()[cancelled.line - 1].strip() == "suspend: true"
    assert edit(cancelled.text, path, run, suspend=True).changed is False  # cancelling twice changes nothing
    resumed = edit(cancelled.text, path, run, suspend=False)
    assert resumed.changed and resumed.text == original


def test_the_a4_args_that_span_three_lines_stay_as_written():
    path = ROOT / "Pulumi.a4.yaml"
    original = path.read_text()
    wrapped = [line for line in original.splitlines() if "--per_device_train_batch_size" in line]
    new = edit(original, path, "gemma4-sql", suspend=True).text
    assert wrapped and all(line in new.splitlines() for line in wrapped)
    assert all(line in new for line in original.splitlines() if line.lstrip().startswith("#"))


def test_an_existing_suspend_false_is_flipped_in_place():
    text = "# mine\nconfig:\n  gke-finetune:runs:\n    - name: a   # first\n      suspend: false  # kept\n      trainer: gemma-jax\n"
    new = edit(text, Path("Pulumi.x.yaml"), "a", suspend=True).text
    assert new == text.replace("suspend: false  # kept", "suspend: true  # kept")
    back = edit(new, Path("Pulumi.x.yaml"), "a", suspend=False).text
    assert back == "# mine\nconfig:\n  gke-finetune:runs:\n    - name: a   # first\n      trainer: gemma-jax\n"


def test_flow_mappings_and_json_files_are_edited_in_their_own_style():
    flow = "config:\n  gke-finetune:runs:\n    - {name: a, trainer: gemma-jax}\n    - {name: 'b', pool: p}\n"
    assert edit(flow, Path("Pulumi.x.yaml"), "b", True).text.splitlines()[3] == "    - {name: 'b', suspend: true, pool: p}"
    as_json = json.dumps({"config": {f"{PROJECT}:runs": [{"name": "a", "trainer": "t"}, {"name": "b"}]}}, indent=1)
    cancelled = edit(as_json, Path("Pulumi.x.yaml"), "b", True).text
    assert json.loads(cancelled)["config"][f"{PROJECT}:runs"][1] == {"name": "b", "suspend": True}
    assert edit(cancelled, Path("Pulumi.x.yaml"), "b", False).text == as_json  # resume undoes cancel
    flow_cancelled = edit(flow, Path("Pulumi.x.yaml"), "b", True).text
    assert edit(flow_cancelled, Path("Pulumi.x.yaml"), "b", False).text == flow
    # A key written first in a flow mapping (by hand) is set false: nothing else of the line moves.
    first = "config:\n  gke-finetune:runs:\n    - {suspend: true, name: a}\n"
    assert edit(first, Path("Pulumi.x.yaml"), "a", False).text == first.replace("true", "false")


def test_a_run_the_file_does_not_declare_is_refused_naming_the_runs():
    path = ROOT / "Pulumi.tpu-queued.yaml"
    with pytest.raises(EditError, match=r"'nope' is not a run of Pulumi.tpu-queued.yaml; runs: gemma3-ladder, "
                                        r"gemma3-single-host"):
        edit(path.read_text(), path, "nope", True)


def test_an_edit_that_would_change_more_than_the_key_is_refused():
    # A plain scalar with a space, which an editor looking for its end by characters cuts short: the
    # loader's marks place the edit, and the read-back check would catch one that changed anything else.
    text = 'config:\n  gke-finetune:runs:\n    - {name: "a", trainer: "t"}\n'
    assert "suspend" in edit(text, Path("Pulumi.x.yaml"), "a", True).text
    spaced = "config:\n  gke-finetune:runs:\n    - {name: a b, trainer: t}\n"
    assert edit(spaced, Path("Pulumi.x.yaml"), "a b", True).text.splitlines()[2] == \
        "    - {name: a b, suspend: true, trainer: t}"
    other = spaced.replace("trainer: t}", "trainer: u, suspend: true}")
    with pytest.raises(EditError, match="would change more than the `suspend` of run 'a b'; set it by hand"):
        _check(spaced, other, Path("Pulumi.x.yaml"), "a b", True)


def test_the_targeted_up_names_the_urn_the_program_gives_the_jobset():
    [jobset] = run_stack("dev").of_type(JOBSET)
    command = apply_command("dev", "gemma3-single-host")
    assert command[:2] == ["pulumi", "up"] and "--yes" in command
    assert command[command.index("--target") + 1] == jobset.urn


# --- the file itself: atomic, locked, its mode and line endings kept, edited only when it can be applied ---

TWO_RUNS = """# two runs of one pool
config:
  gcp:project: my-project-id
  gcp:region: us-east5
  gke-finetune:zones: [us-east5-b]
  gke-finetune:pools:
    - {name: v6e-1x1, accelerator: tpu-v6e, topology: 1x1}
  gke-finetune:datasets: [{name: tiny, url: "https://example.com/tiny.txt"}]
  gke-finetune:runs:
    - name: first     # the first run
      trainer: gemma-jax
      pool: v6e-1x1
      data: tiny
      args: [--maxlen, "256"]
    - name: second
      trainer: gemma-jax
      pool: v6e-1x1
      data: tiny
"""


def _checkout(tmp_path: Path, text: str = TWO_RUNS, newline: str = "\n") -> Path:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.two.yaml").write_bytes(text.replace("\n", newline).encode())
    return tmp_path / "Pulumi.two.yaml"


def _command(root: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "tools.runs", *args, "--stack", "two", "--root", str(root)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


# Each process imports the command, says it is ready, waits for the start file, then runs `make cancel`'s
# command: the edits start within a millisecond of each other, as two people's (or a script's) would.
AT_ONCE = """
import sys, time
from pathlib import Path
from tools.runs.__main__ import main
ready, start, argv = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
ready.touch()
while not start.exists():
    time.sleep(0.0005)
sys.exit(main(argv))
"""


def test_two_cancels_at_once_both_land(tmp_path):
    """Real processes started together, each cancelling its own run of the same file: the lock makes each
    read what the one before wrote (without it, edits that read the same old file lose one another)."""
    path = _checkout(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pairs, start = 3, tmp_path / "start"
    procs = []
    for i in range(pairs):
        copy = tmp_path / f"pair{i}"
        copy.mkdir()
        (copy / "Pulumi.yaml").write_bytes((tmp_path / "Pulumi.yaml").read_bytes())
        (copy / "Pulumi.two.yaml").write_bytes(path.read_bytes())
        for run in ("first", "second"):
            argv = ["cancel", "--edit-only", "--stack", "two", "--run", run, "--root", str(copy)]
            procs.append(subprocess.Popen([sys.executable, "-c", AT_ONCE, str(tmp_path / f"ready-{i}-{run}"),
                                           str(start), *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < len(procs) and time.monotonic() < deadline:
        time.sleep(0.01)
    start.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    for i in range(pairs):
        copy = tmp_path / f"pair{i}"
        runs = yaml.safe_load((copy / "Pulumi.two.yaml").read_text())["config"][RUNS_KEY]
        assert [r.get("suspend") for r in runs] == [True, True], f"pair {i}: {runs}"
        assert sorted(p.name for p in copy.iterdir()) == ["Pulumi.two.yaml", "Pulumi.yaml"]  # no lock or temp file


def test_crlf_and_the_mode_stay_and_resume_gives_the_file_back(tmp_path):
    path = _checkout(tmp_path, newline="\r\n")
    path.chmod(0o640)
    original = path.read_bytes()
    done = _command(tmp_path, "cancel", "--edit-only", "--run", "second")
    assert done.returncode == 0, done.stderr
    edited = path.read_bytes()
    assert edited.count(b"\r\n") == original.count(b"\r\n") + 1 and b"\n" not in edited.replace(b"\r\n", b"")
    assert b"      pool: v6e-1x1\r\n      suspend: true\r\n" not in edited  # after the name, not at the end
    assert b"    - name: second\r\n      suspend: true\r\n" in edited
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert "only the stack file was edited; nothing was applied" in done.stdout
    assert _command(tmp_path, "resume", "--edit-only", "--run", "second").returncode == 0
    assert path.read_bytes() == original and stat.S_IMODE(path.stat().st_mode) == 0o640


def test_nothing_is_edited_when_it_cannot_be_applied_or_written(tmp_path):
    path = _checkout(tmp_path)
    original = path.read_bytes()
    no_cli = _command(tmp_path, "cancel", "--run", "first", path=str(Path(sys.executable).parent))
    assert no_cli.returncode == 69, no_cli.stderr
    assert no_cli.stderr.startswith("cancel: stack two: the Pulumi CLI is not on PATH") and "nothing was changed" in no_cli.stderr
    assert "--edit-only" in no_cli.stderr and path.read_bytes() == original
    path.chmod(0o444)
    read_only = _command(tmp_path, "cancel", "--edit-only", "--run", "first")
    assert read_only.returncode == 73, read_only.stderr
    assert read_only.stderr.startswith("cancel: Pulumi.two.yaml is read-only; nothing was changed")
    assert path.read_bytes() == original and "Traceback" not in read_only.stderr


def test_a_run_that_merges_its_keys_is_edited_in_its_own_mapping(tmp_path):
    text = ("templates:\n  run: &run {trainer: gemma-jax, pool: v6e-1x1, data: tiny}\n"
            + TWO_RUNS.replace("  gke-finetune:runs:\n", "  gke-finetune:runs:\n    - <<: *run\n      name: merged\n"))
    path = _checkout(tmp_path, text)
    new = edit(path.read_text(), path, "merged", True).text
    assert "    - <<: *run\n      name: merged\n      suspend: true\n" in new
    assert edit(new, path, "merged", False).text == text
    shared = text.replace("data: tiny}", "data: tiny, suspend: true}")
    with pytest.raises(EditError, match="the `suspend` of run 'merged' comes from a merge"):
        edit(shared, path, "merged", False)
