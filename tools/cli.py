"""What the commands of tools/ share on their command line: the stack's name as Pulumi allows it, the exit
codes (README.md, "Exit codes", is their one table), and one line instead of a traceback.

`guarded` runs a command's body: its own errors are already one line and an exit code; anything else is a
bug of the command, said in one line with exit 70 (`GKE_FINETUNE_TRACEBACK=1` prints where it happened).
With `--json`, an error is a JSON object on stdout, `{"error": <the line>, "code": <exit code>}`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import traceback
from collections.abc import Callable

# sysexits.h, as the commands use them (README.md's table says what each means for each command).
EX_USAGE, EX_NOINPUT, EX_UNAVAILABLE, EX_SOFTWARE, EX_CANTCREAT, EX_TEMPFAIL, EX_CONFIG = 64, 66, 69, 70, 73, 75, 78
INTERRUPTED = 130
# A stack's name as the Pulumi CLI parses it: 1 to 100 letters, digits, '-', '_' or '.'
# (pulumi/pulumi sdk/go/common/tokens/stack_name.go `ParseStackName`, v3.274.1).
_STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def stack_name(text: str) -> str:
    """argparse's type for --stack: a name Pulumi takes, which names no path but Pulumi.<stack>.yaml."""
    if not _STACK_NAME.fullmatch(text) or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} is not a stack name: 1 to 100 letters, digits, '-', '_' or '.' "
                                         "(Pulumi's rule), the <stack> of a Pulumi.<stack>.yaml")
    return text


def seconds(text: str) -> float:
    """argparse's type for a duration: a positive, finite number of seconds (below about four months)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 10 ** 7:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds")
    return value


def count(text: str) -> int:
    """argparse's type for a number of things: 0 or more, in digits."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (0 or more)")
    return int(text)


def positive(text: str) -> int:
    """argparse's type for a number that must be 1 or more."""
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


def say_error(command: str, message: str, code: int, as_json: bool = False) -> int:
    """An error as the user reads it: `<command>: <message>` on stderr, or JSON on stdout; its exit code."""
    line = message if message.startswith(f"{command}:") else f"{command}: {message}"
    if as_json:
        print(json.dumps({"error": line, "code": code}), flush=True)
    else:
        print(line, file=sys.stderr, flush=True)
    return code


def guarded(command: str, body: Callable[[], int], as_json: bool = False) -> int:
    """`body()`'s exit code; a bug in it as one line and exit 70 (argparse's own exit passes through)."""
    try:
        return body()
    except KeyboardInterrupt:
        return INTERRUPTED
    except Exception as err:  # noqa: BLE001 (the last line of defence: no traceback reaches a user)
        if os.environ.get("GKE_FINETUNE_TRACEBACK"):
            traceback.print_exc()
        where = traceback.extract_tb(err.__traceback__)[-1]
        return say_error(command, f"internal error: {type(err).__name__}: {err} (at {os.path.basename(where.filename)}:"
                         f"{where.lineno}; a bug of this command: please report it with the command line; "
                         "GKE_FINETUNE_TRACEBACK=1 prints where it happened)", EX_SOFTWARE, as_json)


def wants_json(argv: list[str] | None) -> bool:
    """Whether the command line asks for JSON (read before argparse, so that its errors come as JSON too)."""
    return "--json" in (sys.argv[1:] if argv is None else argv)


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """`parser.parse_args(argv)`; with --json, a usage error (exit 2, naming the argument) comes as JSON too."""
    if not wants_json(argv):
        return parser.parse_args(argv)
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return parser.parse_args(argv)
    except SystemExit as stop:
        if stop.code:
            lines = said.getvalue().strip().splitlines()
            print(json.dumps({"error": lines[-1] if lines else "invalid arguments", "code": stop.code}), flush=True)
        raise
