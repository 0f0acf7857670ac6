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

The file is edited as the user wrote it, one line (or one flow-mapping entry), at the place the one YAML
loader (stack/yaml_loader.py) gives each key and value: comments, order, quoting and line endings (CRLF
stays CRLF) are kept. The edit is then read back with the same loader: it must say what the file said, but
for that run's `suspend`, or nothing is written. A `suspend` a merge (`<<`) brings is shared with other
mappings: it is set by hand. The file is replaced atomically under a lock on its folder, with its mode
(tools/files.py), so two cancels at once both land; a read-only file is left as it is.

`--target` applies the one JobSet: other edits pending in the stack file wait for the user's own
`make up` (https://www.pulumi.com/docs/iac/cli/commands/pulumi_up/, `--target`). A targeted resource
the program no longer declares (a suspended Kueue run) is deleted.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from yaml.nodes import MappingNode, Node, ScalarNode

from components.runs import jobset_urn
from core.names import PROJECT
from stack.yaml_loader import StackFileError, YamlDocument, load_yaml
from tools.files import check_writable, locked, replace_text

RUNS_KEY = f"{PROJECT}:runs"


class EditError(Exception):
    """The stack file can't be edited as asked; the message says why."""


@dataclass(frozen=True)
class Edit:
    text: str  # the new file
    changed: bool  # False: the file already says it
    line: int  # 1-based line of the change


@dataclass(frozen=True)
class _Entry:
    """A run's mapping in the stack file: its node, its values, and its own key and value nodes."""

    node: MappingNode
    values: dict
    pairs: list[tuple[Node, Node]]

    def own(self, key: str) -> tuple[Node, Node] | None:
        return next(((k, v) for k, v in self.pairs if isinstance(k, ScalarNode) and k.value == key), None)


def _read(text: str, path: Path) -> YamlDocument:
    try:
        return load_yaml(path, text)
    except StackFileError as err:
        raise EditError(str(err)) from None


def _entry(document: YamlDocument, run: str, path: Path) -> _Entry:
    runs = ((document.data or {}).get("config") or {}).get(RUNS_KEY) if isinstance(document.data, dict) else None
    _, nodes = document.node_at("config", RUNS_KEY)
    if not isinstance(runs, list) or nodes is None:
        raise EditError(f"{path.name} declares no `{RUNS_KEY}` list")
    for values, node in zip(runs, nodes.value):
        if isinstance(values, dict) and values.get("name") == run and isinstance(node, MappingNode):
            return _Entry(node, values, list(node.value))
    names = ", ".join(str(e.get("name")) for e in runs if isinstance(e, dict))
    raise EditError(f"{run!r} is not a run of {path.name}; runs: {names or '(none)'}")


class _Lines:
    """The file's lines with their own endings, edited by the loader's marks (0-based line and column)."""

    def __init__(self, text: str):
        self.lines = text.splitlines(keepends=True)

    def body(self, row: int) -> str:
        return self.lines[row].rstrip("\r\n")

    def ending(self, row: int) -> str:
        line = self.lines[row]
        return line[len(self.body(row)):] or next((self.lines[r][len(self.body(r)):] for r in range(row - 1, -1, -1)
                                                   if self.lines[r] != self.body(r)), "\n")

    def set_body(self, row: int, body: str) -> None:
        self.lines[row] = body + self.lines[row][len(self.body(row)):]

    def text(self) -> str:
        return "".join(self.lines)


def _end_row(key: Node, value: Node) -> int:
    """The last line of a key's value as written here (an alias (*name) is on its key's line)."""
    if value.start_mark.index < key.start_mark.index:
        return key.start_mark.line
    end = value.end_mark
    return end.line - 1 if end.column == 0 and end.line > key.start_mark.line else end.line


def _replace_value(lines: _Lines, value: Node, word: str) -> int:
    row = value.start_mark.line
    if value.end_mark.line != row:
        raise EditError("its `suspend` value spans lines")
    body = lines.body(row)
    lines.set_body(row, body[:value.start_mark.column] + word + body[value.end_mark.column:])
    return row


def _insert(lines: _Lines, entry: _Entry) -> int:
    """`suspend: true` after the run's `name` (or its first key, when a merge brings the name)."""
    key, value = entry.own("name") or entry.pairs[0]
    if entry.node.flow_style:
        row = value.end_mark.line if value.start_mark.index > key.start_mark.index else key.start_mark.line
        at = value.end_mark.column if value.start_mark.index > key.start_mark.index else None
        if at is None or value.end_mark.line != key.start_mark.line:
            raise EditError("its flow mapping spans lines")
        body = lines.body(row)
        quote = '"' if body[key.start_mark.column] == '"' else ""
        lines.set_body(row, f"{body[:at]}, {quote}suspend{quote}: true{body[at:]}")
        return row
    row = _end_row(key, value)
    lines.lines.insert(row + 1, " " * key.start_mark.column + "suspend: true" + lines.ending(row))
    return row + 1


def _remove(lines: _Lines, entry: _Entry, key: Node, value: Node) -> int:
    """The key taken out as `_insert` put it in (its own line, or `, suspend: true` in a flow mapping), so
    that cancel then resume gives the file back; where it was written otherwise, its value set false."""
    row, body = key.start_mark.line, lines.body(key.start_mark.line)
    rest = body[value.end_mark.column:].strip()
    own_line = body[:key.start_mark.column].strip() == "" and (rest == "" or rest.startswith("#")) \
        and value.end_mark.line == row
    if not entry.node.flow_style and own_line and len(entry.pairs) > 1:
        del lines.lines[row]
        return row
    head = body[:key.start_mark.column].rstrip()
    if entry.node.flow_style and value.end_mark.line == row and head.endswith(","):
        lines.set_body(row, head[:-1] + body[value.end_mark.column:])
        return row
    return _replace_value(lines, value, "false")


def edit(text: str, path: Path, run: str, suspend: bool) -> Edit:
    """The stack file's text with the run's `suspend` set (cancel) or removed (resume)."""
    entry = _entry(_read(text, path), run, path)
    current = entry.values.get("suspend", False) is True
    first_row = (entry.own("name") or entry.pairs[0])[0].start_mark.line + 1 if entry.pairs else 1
    if current == suspend:
        return Edit(text, False, first_row)
    own, lines = entry.own("suspend"), _Lines(text)
    if own is None and "suspend" in entry.values:
        raise EditError(f"the `suspend` of run {run!r} comes from a merge (`<<`) that other mappings share; set it by hand")
    try:
        if suspend:
            row = _replace_value(lines, own[1], "true") if own else _insert(lines, entry)
        else:
            row = _remove(lines, entry, *own)
    except EditError as err:
        raise EditError(f"run {run!r} in {path.name}: {err}; set `suspend` by hand") from None
    new = lines.text()
    _check(text, new, path, run, suspend)
    return Edit(new, True, row + 1)


def _check(old: str, new: str, path: Path, run: str, suspend: bool) -> None:
    """The new text says what the old one did, but for the run's suspend; else EditError."""
    before = _read(old, path).data
    try:
        after = load_yaml(path, new).data
    except StackFileError as err:
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
        raise EditError(f"editing {path.name} would change more than the `suspend` of run {run!r}; set it by hand")


def edit_file(path: Path, run: str, suspend: bool) -> Edit:
    """`edit` applied to the file itself: read, edited and replaced under a lock on its folder, atomically and
    with its mode (tools/files.py); a read-only file is refused (tools.files.WriteRefused)."""
    with locked(path.parent):
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            text = None  # the loader names the byte and its place
        except OSError as err:
            raise EditError(f"{path.name} can't be read: {err.strerror}") from None
        if text is None:
            _read_file(path)
        done = edit(text.removeprefix("\ufeff"), path, run, suspend)
        if done.changed:
            check_writable(path)
            replace_text(path, ("\ufeff" if text.startswith("\ufeff") else "") + done.text)
        return done


def _read_file(path: Path) -> None:
    try:
        load_yaml(path)
    except StackFileError as err:
        raise EditError(str(err)) from None


def pulumi_problem() -> str | None:
    """Why the targeted `pulumi up` can't run here (checked before the file is edited); None when it can."""
    if shutil.which("pulumi") is None:
        return "the Pulumi CLI is not on PATH (README, Prerequisites; `make doctor` checks it)"
    return None


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
