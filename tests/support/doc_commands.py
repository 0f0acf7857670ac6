"""The commands the README and docs/ show, and the checks that hold each to what it runs.

A command is found in a fenced `sh` (or `bash`, `shell`) block, one per line once `\\` continuations
are joined, a `$(...)` substitution and each part of `;`, `&&`, `||` and `|` counted as its own; and
in an inline code span of the prose that starts with `make `, `pulumi ` or `python -m`. The rules:

- every block parses as bash (`bash -n`, its `<placeholder>`s filled in);
- `make <target> [VAR=value]...`: the target is one a user may call (tests/support/makefile.py) and
  each variable is one the Makefile reads;
- `pulumi <command>... [--flag]...`: the command and each flag are ones the pinned Pulumi CLI has
  (its own `--help`, the command path read back from the Usage line it prints);
- `python -m <project module> [<subcommand>] [--flag]...`: the module runs, the subcommand is one of
  its choices and each flag one it takes (its `--help`);
- a block's command with nothing to fill in (no `<placeholder>`, no `$`, no `...`) is run when it is
  offline and short: `make plan` and `make help`. The rest need a cloud project or a cluster
  (`make up`, `make status`), or run for minutes (`make test`, `make e2e`, `make plan-diff`): those
  are held to the rules above only.
"""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.S | re.M)
_SHELL = {"sh", "bash", "shell"}
_INLINE = re.compile(r"`([^`]+)`")  # a span may wrap onto the next line of the paragraph
_PROGRAMS = {"make", "pulumi", "python", "python3"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Command:
    where: str  # "README.md:123"
    words: tuple[str, ...]  # from the program on
    in_block: bool

    @property
    def program(self) -> str:
        first = self.words[0]
        return "python" if first.endswith(("/python", "/python3")) or first in ("python", "python3") else first

    @property
    def filled(self) -> bool:
        """Nothing in it for the reader to fill in."""
        return not any("<" in w or "$" in w or w == "..." or "…" in w for w in self.words)

    def __str__(self) -> str:
        return f"{self.where}: {' '.join(self.words)}"


def doc_files(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def shell_blocks(path: Path) -> list[tuple[int, str]]:
    """(line of the block's first command, its text) for each fenced shell block."""
    text = path.read_text()
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in _FENCE.finditer(text) if m.group(1) in _SHELL]


def parses_as_bash(block: str) -> subprocess.CompletedProcess:
    """`bash -n` of a block, its `<placeholder>`s filled in first (bash would read `<run>` as a redirection)."""
    return subprocess.run(["bash", "-n"], input=re.sub(r"<[\w .'-]+>", "PLACEHOLDER", block), capture_output=True,
                          text=True)


def output_blocks(path: Path) -> list[str]:
    """The text of each fenced block without a language: what a command printed."""
    return [m.group(2) for m in _FENCE.finditer(path.read_text()) if not m.group(1)]


def _segments(line: str) -> list[str]:
    """The parts of one shell line that are commands of their own: split at ; && || | and around $( ),
    outside single quotes; a comment ends the line."""
    parts, current, depth, quote = [], [], 0, ""
    i = 0
    while i < len(line):
        c, two = line[i], line[i:i + 2]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "'" and quote != '"':
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        elif c == "#" and not quote and (i == 0 or line[i - 1].isspace()):
            break
        elif two == "$(" or (c == ")" and depth) or (not quote and (two in ("&&", "||") or c in ";|`")):
            parts.append("".join(current))
            current = []
            depth += 1 if two == "$(" else -1 if c == ")" else 0
            i += 2 if two in ("$(", "&&", "||") else 1
            continue
        current.append(c)
        i += 1
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _words(segment: str) -> list[str]:
    if segment.count('"') % 2:
        segment = segment.replace('"', "")
    try:
        return shlex.split(segment)
    except ValueError:
        return segment.split()


def _command(words: list[str], where: str, in_block: bool) -> Command | None:
    while words and (_ASSIGNMENT.match(words[0]) or words[0] in ("eval", "exec", "env")):
        words = words[1:]
    if not words:
        return None
    program = words[0]
    if len(words) > 1 and words[1].endswith(":"):  # `make status: exit code ...`: make's own words quoted
        return None
    if program in _PROGRAMS or program.endswith(("/python", "/python3")):
        return Command(where, tuple(words), in_block)
    return None


def _logical_lines(body: str) -> list[tuple[int, str]]:
    """(index of its first physical line, the line) with `\\` continuations joined."""
    out, pending, start = [], "", 0
    for index, physical in enumerate(body.split("\n")):
        if not pending:
            start = index
        if physical.endswith("\\"):
            pending += physical[:-1] + " "
            continue
        out.append((start, pending + physical))
        pending = ""
    return out


def commands(path: Path) -> list[Command]:
    """Every command of `path`'s shell blocks and of its inline spans that start with a command."""
    found = []
    for line_no, body in shell_blocks(path):
        for at, line in _logical_lines(body):
            for segment in _segments(line):
                command = _command(_words(segment), f"{path.name}:{line_no + at}", True)
                if command:
                    found.append(command)
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text())
    for m in _INLINE.finditer(text):
        span = " ".join(m.group(1).split())
        if span.startswith(("make ", "pulumi ", "python -m ", ".venv/bin/python -m ")):
            words = _words(_segments(span)[0]) if _segments(span) else []
            command = _command(words, f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}", False)
            if command:
                found.append(command)
    return found


# --- make -------------------------------------------------------------------------------------------


def makefile_variables(root: Path) -> set[str]:
    """The variables the Makefile reads: `$(NAME)`, `$(origin NAME)`, `ifneq ($(NAME),)`."""
    text = (root / "Makefile").read_text()
    return set(re.findall(r"\$\(([A-Z][A-Z0-9_]*)[):]", text)) | set(re.findall(r"origin ([A-Z][A-Z0-9_]*)", text))


def check_make(found: list[Command], user_targets: set[str], variables: set[str]) -> list[str]:
    problems = []
    for command in (c for c in found if c.program == "make"):
        args = [w for w in command.words[1:] if not w.startswith("-") and w != "..."]
        targets = [w for w in args if "=" not in w]
        if targets and targets[0].startswith("<"):  # `make <target>`: any target, as a message quotes it
            continue
        if not targets:
            problems.append(f"{command}: no target (the default goal is `make help`; name one)")
        problems += [f"{command}: {t!r} is no target a user may call; targets: {', '.join(sorted(user_targets))}"
                     for t in targets if t not in user_targets]
        problems += [f"{command}: the Makefile reads no variable {w.split('=')[0]!r}"
                     for w in args if "=" in w and w.split("=")[0] not in variables]
    return problems


# --- pulumi -----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _pulumi_help(pulumi: str, path: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """(the command path the CLI resolved `path` to, its help text)."""
    done = subprocess.run([pulumi, *path, "--help"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PULUMI_SKIP_UPDATE_CHECK": "true", "HOME": "/tmp"})
    lines = done.stdout.splitlines()
    usage = next((lines[i + 1].split() for i, line in enumerate(lines[:-1]) if line == "Usage:"), ["pulumi"])
    resolved = tuple(w for w in usage[1:] if not w.startswith(("[", "<", "-")))
    return resolved, done.stdout


def check_pulumi(found: list[Command], pulumi: str) -> list[str]:
    problems = []
    for command in (c for c in found if c.program == "pulumi"):
        path: tuple[str, ...] = ()
        positional = [w for w in command.words[1:] if not w.startswith("-")]
        flags = [w.split("=")[0] for w in command.words[1:] if w.startswith("--")]
        rest = list(positional)
        while rest:
            resolved, _ = _pulumi_help(pulumi, path + (rest[0],))
            if len(resolved) <= len(path):
                break
            path = resolved
            rest.pop(0)
        if not path:
            problems.append(f"{command}: {positional[0] if positional else '(nothing)'!r} is not a pulumi command")
            continue
        resolved, text = _pulumi_help(pulumi, path)
        usage = next(line for line in text.splitlines() if line.startswith("  pulumi"))
        takes_arguments = "<" in usage or re.search(r"\[(?!flags\]|command\])", usage)
        if rest and not takes_arguments and not any(w.startswith("-") for w in command.words):
            problems.append(f"{command}: `pulumi {' '.join(path)}` has no command {rest[0]!r}")
        problems += [f"{command}: `pulumi {' '.join(path)}` has no flag {flag}" for flag in flags
                     if not re.search(rf"(^|[\s,]){re.escape(flag)}\b", text, re.M)]
    return problems


# --- python -m --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _python_help(root: Path, module: str, sub: str | None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *([sub] if sub else []), "--help"], cwd=root,
                          capture_output=True, text=True, timeout=120)


def check_python(found: list[Command], root: Path) -> list[str]:
    """`python -m <module>` of the project's own packages (tools, bench, e2e, tests)."""
    problems = []
    for command in (c for c in found if c.program == "python" and "-m" in c.words):
        module_at = command.words.index("-m") + 1
        module = command.words[module_at] if module_at < len(command.words) else ""
        if module.split(".")[0] not in ("tools", "bench", "e2e", "tests") or "<" in module:
            continue
        top = _python_help(root, module, None)
        if top.returncode != 0:
            problems.append(f"{command}: `python -m {module} --help` fails: {top.stderr.strip()[-300:]}")
            continue
        args = list(command.words[module_at + 1:])
        choices = re.search(r"\{([\w,-]+)\}", top.stdout)
        sub = None
        if choices:
            sub = args[0] if args and not args[0].startswith("-") else None
            if sub not in choices.group(1).split(","):
                problems.append(f"{command}: {sub!r} is not a command of {module}; commands: {choices.group(1)}")
                continue
        text = _python_help(root, module, sub).stdout if sub else top.stdout
        problems += [f"{command}: `python -m {module}{' ' + sub if sub else ''}` has no option {flag}"
                     for flag in (w.split("=")[0] for w in args if w.startswith("--"))
                     if not re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", text, re.M)]
    return problems


# --- what runs -------------------------------------------------------------------------------------

RUN_TARGETS = {"plan", "help"}


def runnable(found: list[Command]) -> list[Command]:
    """The block commands run as they are: `make plan`/`make help` with nothing to fill in."""
    seen, out = set(), []
    for command in found:
        targets = [w for w in command.words[1:] if "=" not in w and not w.startswith("-")]
        if (command.in_block and command.program == "make" and command.filled and targets
                and set(targets) <= RUN_TARGETS and command.words not in seen):
            seen.add(command.words)
            out.append(command)
    return out
