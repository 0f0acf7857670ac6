"""`make cancel STACK= RUN=` and `make resume STACK= RUN=`: a run stopped and started again, declared.

Cancelling sets the run's `suspend: true` in Pulumi.<stack>.yaml and applies that run alone
(`pulumi up --target <its JobSet>`); resuming removes the key (or sets it false) and applies it the
same way. The stopped state lives in the stack file, so the next `pulumi up`, by anyone or by the
deploy workflow, keeps the run stopped instead of silently starting it again, and a reviewer sees it.
What the program declares for it (stack/queueing.py `withdrawn`): outside Kueue the JobSet stays,
with `spec.suspend: true`, and JobSet deletes its pods; a run Kueue admits is not declared, since
Kueue starts a suspended job it has admitted. Either way the pods get their grace period to write
a checkpoint (core/trainers.py), and the checkpoints and progress record stay in the bucket, from
which the resumed run continues.

The file is edited in place, one line (or one flow-mapping entry), found by ruamel.yaml's round-trip
loader, which knows each key's line and column: ruamel's own dumper would rewrite a flow sequence
that spans lines (Pulumi.a4.yaml's `args`) onto one, and the file is the user's. The edit is then
read back with the stack reader's YAML loader: it must say what the file said, but for that run's
`suspend`, or nothing is written.

`--target` applies the one JobSet: other edits pending in the stack file wait for the user's own
`make up` (https://www.pulumi.com/docs/iac/cli/commands/pulumi_up/, `--target`). A targeted resource
the program no longer declares (a suspended Kueue run) is deleted.
"""

from __future__ import annotations

import copy
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml
from ruamel.yaml import YAML

from components.runs import jobset_urn
from core.names import PROJECT

RUNS_KEY = f"{PROJECT}:runs"


class EditError(Exception):
    """The stack file can't be edited as asked; the message says why."""


@dataclass(frozen=True)
class Edit:
    text: str  # the new file
    changed: bool  # False: the file already says it
    line: int  # 1-based line of the change


def _runs(text: str, path: Path):
    loader = YAML()  # round-trip: mappings carry the line and column of each key and value
    try:
        document = loader.load(text)
    except Exception as err:  # ruamel's YAMLError and friends
        raise EditError(f"{path.name} is not valid YAML: {err}") from None
    runs = ((document or {}).get("config") or {}).get(RUNS_KEY)
    if not isinstance(runs, list):
        raise EditError(f"{path.name} declares no `{RUNS_KEY}` list")
    return runs


def _entry(runs, run: str, path: Path):
    for entry in runs:
        if isinstance(entry, dict) and entry.get("name") == run:
            return entry
    names = ", ".join(str(e.get("name")) for e in runs if isinstance(e, dict))
    raise EditError(f"{run!r} is not a run of {path.name}; runs: {names or '(none)'}")


def _token_end(line: str, col: int) -> int:
    """The column after the scalar starting at `col` (quoted, or plain up to , } ] # or the end)."""
    if line[col] in "\"'":
        return line.index(line[col], col + 1) + 1
    end = col
    while end < len(line) and line[end] not in ",}]#" and not line[end].isspace():
        end += 1
    return end


def _replace_value(lines: list[str], entry, value: str) -> int:
    row, col = entry.lc.value("suspend")
    line = lines[row]
    lines[row] = line[:col] + value + line[_token_end(line, col):]
    return row


def _insert(lines: list[str], entry) -> int:
    key_row, key_col = entry.lc.key("name")
    line = lines[key_row]
    if entry.fa.flow_style():
        quote = '"' if line[key_col] == '"' else ""
        at = _token_end(line, entry.lc.value("name")[1])
        lines[key_row] = f"{line[:at]}, {quote}suspend{quote}: true{line[at:]}"
        return key_row
    lines.insert(key_row + 1, " " * key_col + "suspend: true")
    return key_row + 1


def _remove(lines: list[str], entry) -> int:
    """The key taken out as `_insert` put it in (its own line, or `, suspend: true` in a flow mapping), so
    that cancel then resume gives the file back; where it was written otherwise, its value set false."""
    row, col = entry.lc.key("suspend")  # a quoted key's column is its opening quote's
    value_row, value_col = entry.lc.value("suspend")
    line = lines[row]
    if not entry.fa.flow_style() and line[:col].strip() == "" and len(entry) > 1:
        del lines[row]  # the key's own line: the file as it was before `make cancel`
        return row
    head = line[:col].rstrip()
    if entry.fa.flow_style() and value_row == row and head.endswith(","):
        lines[row] = head[:-1] + line[_token_end(line, value_col):]  # from the comma before the pair to its end
        return row
    return _replace_value(lines, entry, "false")


def edit(text: str, path: Path, run: str, suspend: bool) -> Edit:
    """The stack file's text with the run's `suspend` set (cancel) or removed (resume)."""
    entry = _entry(_runs(text, path), run, path)
    current = entry.get("suspend", False) is True
    if current == suspend:
        return Edit(text, False, entry.lc.key("name")[0] + 1)
    lines = text.split("\n")
    if suspend:
        row = _replace_value(lines, entry, "true") if "suspend" in entry else _insert(lines, entry)
    else:
        row = _remove(lines, entry)
    new = "\n".join(lines)
    _check(text, new, path, run, suspend)
    return Edit(new, True, row + 1)


def _check(old: str, new: str, path: Path, run: str, suspend: bool) -> None:
    """The new text says what the old one did, but for the run's suspend; else EditError."""
    try:
        before, after = yaml.safe_load(old), yaml.safe_load(new)
    except yaml.YAMLError as err:
        raise EditError(f"editing {path.name} would leave it unreadable ({err}); set `suspend` by hand") from None
    expected = copy.deepcopy(before)
    for entry in expected["config"][RUNS_KEY]:
        if isinstance(entry, dict) and entry.get("name") == run:
            if suspend:
                entry["suspend"] = True
            else:
                entry.pop("suspend", None)
    for entry in after["config"][RUNS_KEY]:
        if isinstance(entry, dict) and entry.get("name") == run and not suspend and entry.get("suspend") is False:
            entry.pop("suspend")
    if after != expected:
        raise EditError(f"editing {path.name} would change more than run {run!r}'s suspend; set it by hand")


def apply_command(stack: str, run: str) -> list[str]:
    """The `pulumi up` that applies the run's JobSet alone."""
    return ["pulumi", "up", "--stack", stack, "--target", jobset_urn(stack, PROJECT, run), "--yes",
            "--non-interactive"]


def apply(stack: str, run: str, cwd: Path, env: dict | None = None) -> int:
    """Run the targeted `pulumi up`, its output passed through; its exit code."""
    try:
        return subprocess.run(apply_command(stack, run), cwd=cwd, env=env, check=False).returncode
    except FileNotFoundError:
        raise EditError("the Pulumi CLI is not on PATH (README, Prerequisites; `make doctor` checks it)") from None
