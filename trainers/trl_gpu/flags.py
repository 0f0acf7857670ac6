"""The trainer's command-line flags, checkable without the trainer's dependencies.

The trainer parses its flags with TRL's `TrlParser` over the dataclasses in
args.py (the one place they are declared), which needs torch, transformers
and TRL. `flags.json`, next to this file, is a snapshot of that parser's
flags (option strings, value type, choices, nargs), written from the real
parser by

    python -m trainers.trl_gpu.flags --write      # in the trainer's environment

and checked against it by the trainer's tests. This module reads it with the
standard library only and rebuilds an argparse parser with the same options,
so `argument_problems` rejects what the real parser rejects at parse time:
an unknown flag, a missing value, a value of the wrong type or not among the
choices, a value without a flag. Value checks that come after parsing
(ranges, combinations: args.validate) are the trainer's own, at start-up.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("flags.json")
# TrlParser takes `--config <yaml>` out of argv before parsing (trl/scripts/utils.py).
CONFIG_FLAG = "--config"
_TRUE = ("yes", "true", "t", "y", "1")
_FALSE = ("no", "false", "f", "n", "0")


class _Problem(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print and exit 2
        raise _Problem(message)


def _string_to_bool(value: str) -> bool:
    # transformers/TRL's string_to_bool
    if isinstance(value, bool):
        return value
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"{value!r} is not a boolean; expected one of {'/'.join(_TRUE + _FALSE)}")


def _converter(spec: dict):
    kind = spec["type"]
    if kind == "opaque":
        return None
    if kind == "enum":
        values = spec["values"]

        def enum_value(value: str) -> str:
            if value not in values:
                raise ValueError(value)
            return value

        base = enum_value
    else:
        base = {"int": int, "float": float, "str": str, "bool": _string_to_bool, "dict": dict}[kind]
    if not spec.get("accepts_none"):
        return base

    def or_none(value: str):
        return None if value.lower() in ("none", "null") else base(value)

    or_none.__name__ = base.__name__
    return or_none


def load_snapshot() -> list[dict]:
    return json.loads(SNAPSHOT.read_text())["flags"]


def build_parser(flags: list[dict]) -> _Parser:
    parser = _Parser(allow_abbrev=False, add_help=False, prog="trainers.trl_gpu.sft")
    for spec in flags:
        if spec["action"] == "help":
            parser.add_argument(*spec["options"], action="store_true", dest="help")
        elif spec["action"] == "store_false":
            parser.add_argument(*spec["options"], action="store_false", dest=spec["dest"])
        else:
            kwargs = {"dest": spec["dest"], "nargs": spec["nargs"], "choices": spec["choices"],
                      "default": spec.get("default")}
            kwargs["type"] = _converter(spec) or str
            if spec["nargs"] == "?":
                kwargs["const"] = True
            parser.add_argument(*spec["options"], **kwargs)
    return parser


def _reword(message: str) -> str:
    """argparse's message as "<flag>: <problem>"."""
    if message.startswith("argument "):
        flags, _, problem = message[len("argument ") :].partition(": ")
        flag = flags.split("/")[0]
        if problem.startswith("invalid choice: "):
            value, _, allowed = problem[len("invalid choice: ") :].partition(" (choose from ")
            return f"{flag}: {value} is not allowed; choose from {allowed.rstrip(')')}"
        if problem.startswith("invalid ") and " value: " in problem:
            kind, _, value = problem[len("invalid ") :].partition(" value: ")
            kind = {"string_to_bool": "boolean", "enum_value": "allowed value"}.get(kind, kind)
            return f"{flag}: {value} is not a{'n' if kind[0] in 'aeiou' else ''} {kind}"
        if problem.startswith("expected "):
            return f"{flag}: missing value ({problem})"
        return f"{flag}: {problem}"
    return message


def _unknown(token: str, known: list[str]) -> str:
    name = token.split("=", 1)[0]
    if not name.startswith("-"):
        return f"{token!r}: a value without a flag"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"{name}: unknown flag{hint}"


def _take_config(argv: list[str], problems: list[str]) -> list[str]:
    if CONFIG_FLAG not in argv:
        return argv
    index = argv.index(CONFIG_FLAG)
    if index + 1 >= len(argv):
        problems.append(f"{CONFIG_FLAG}: missing value (expected a YAML file)")
        return argv[:index]
    return argv[:index] + argv[index + 2 :]


def argument_problems(argv: Sequence[str], flags: list[dict] | None = None) -> list[str]:
    """One line per problem, each starting with the flag, e.g.
    "--max_len: unknown flag; did you mean --max_length?",
    "--num_train_epochs: 'abc' is not a float", "'stray': a value without a flag".
    Empty list: argv parses."""
    flags = load_snapshot() if flags is None else flags
    problems: list[str] = []
    args = _take_config([str(a) for a in argv], problems)
    parser = build_parser(flags)
    known = [o for spec in flags for o in spec["options"] if o.startswith("--")]
    try:
        namespace, extras = parser.parse_known_args(args)
    except _Problem as err:
        # argparse stops at its first error; unknown flags are still worth naming.
        unknown = [t for t in args if t.startswith("--") and t.split("=", 1)[0] not in known]
        return problems + [_reword(str(err))] + [_unknown(t, known) for t in unknown]
    problems += [_unknown(token, known) for token in extras]
    if getattr(namespace, "help", False):
        problems.append("--help: prints the flags and exits without training")
    opaque = {o: spec for spec in flags if spec["type"] == "opaque" for o in spec["options"]}
    for token in args:
        name = token.split("=", 1)[0]
        if name in opaque:
            problems.append(f"{name}: a {opaque[name]['type_name']} value cannot be checked before the run; set it in --config")
    return problems


# --- writing the snapshot (in the trainer's environment only) ---


def _describe_type(action) -> dict:
    convert = action.type
    name = getattr(convert, "__name__", type(convert).__name__)
    accepts_none = False
    if convert is not None:
        try:
            accepts_none = convert("none") is None
        except Exception:  # any converter error means "none" is not accepted
            accepts_none = False
    if action.choices is not None:
        return {"type": "str", "accepts_none": accepts_none}
    if convert is None or name in ("str", "int", "float", "dict"):
        return {"type": name if convert is not None else "str", "accepts_none": accepts_none}
    if name == "string_to_bool":
        return {"type": "bool", "accepts_none": accepts_none}
    if isinstance(convert, type) and hasattr(convert, "__members__"):  # an Enum class
        return {"type": "enum", "values": [m.value for m in convert], "accepts_none": accepts_none}
    return {"type": "opaque", "type_name": name, "accepts_none": accepts_none}


def _plain(value):
    """A default as JSON holds it; None where it is not plain data."""
    value = getattr(value, "value", value)  # an Enum's value
    return value if isinstance(value, (str, int, float, bool)) or value is None else None


def flag_values(argv: Sequence[str], flags: list[dict] | None = None) -> dict:
    """The values a command line gives each flag, defaults included (what parsing alone decides), for the
    platform's estimates; argv is expected to parse (argument_problems)."""
    flags = load_snapshot() if flags is None else flags
    args = _take_config([str(a) for a in argv], [])
    namespace, _ = build_parser(flags).parse_known_args(args)
    return vars(namespace)


def snapshot_of(parser: argparse.ArgumentParser) -> list[dict]:
    """The flags of a real argparse parser, as flags.json stores them."""
    flags = []
    for action in parser._actions:
        spec = {"options": list(action.option_strings), "dest": action.dest}
        if isinstance(action, argparse._HelpAction):
            spec.update(action="help", type="str", nargs=0, choices=None)
        elif isinstance(action, argparse._StoreFalseAction):
            spec.update(action="store_false", type="str", nargs=0, choices=None)
        elif isinstance(action, argparse._StoreAction):
            choices = [str(getattr(c, "value", c)) for c in action.choices] if action.choices is not None else None
            spec.update(action="store", nargs=action.nargs, choices=choices, **_describe_type(action),
                        default=_plain(action.default))
        else:
            raise TypeError(f"{action.option_strings}: argparse action {type(action).__name__} is not described")
        flags.append(spec)
    return flags


def real_snapshot() -> list[dict]:
    from .args import real_parser  # torch, transformers, TRL

    return snapshot_of(real_parser())


def write_snapshot(path: Path = SNAPSHOT) -> None:
    document = {
        "about": "Flags of trainers.trl_gpu.sft, from its real parser; regenerate: python -m trainers.trl_gpu.flags --write",
        "flags": real_snapshot(),
    }
    path.write_text(json.dumps(document, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--write"]:
        write_snapshot()
        print(f"wrote {SNAPSHOT}")
        return 0
    problems = argument_problems(argv)
    print("\n".join(problems) or "ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
