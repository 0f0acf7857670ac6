"""Helpers of `make scan`, which runs checkov on every shipped stack's rendered runs.

    python -m tools.scan skips                             # the skipped check ids, for checkov --skip-check
    python -m tools.scan summary plan/scan/results.json  # the counts; fails when no check ran

The skip list is tools/scan_skips.yaml: one entry per check id, each with its
reason. `summary` guards against a scan that passes by checking nothing (a
kind checkov does not know, such as JobSet, yields no check at all).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from stack.problems import ConfigError
from stack.yaml_loader import load_yaml

ROOT = Path(__file__).resolve().parent.parent
SKIPS = ROOT / "tools" / "scan_skips.yaml"
# checkov's Kubernetes checks: CKV_K8S_<n>, and its graph checks CKV2_K8S_<n>.
CHECK_ID = re.compile(r"CKV2?_K8S_[1-9][0-9]*")


class SkipListError(ValueError):
    """The skip list is malformed; the message lists every problem."""


def load_skips(path: Path = SKIPS) -> dict[str, str]:
    """{check id: reason} from the skip list, after checking every entry."""
    try:
        raw = load_yaml(path).data or {}  # the one loader: a duplicate id is refused, not the last one kept
    except ConfigError as err:
        raise SkipListError(str(err)) from None
    entries = raw.get("skips") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not entries:
        raise SkipListError(f"{path}: expected a non-empty `skips:` list")
    skips: dict[str, str] = {}
    problems = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) != {"id", "reason"}:
            problems.append(f"entry {i}: expected exactly `id` and `reason`, got {entry!r}")
            continue
        check, reason = entry["id"], entry["reason"]
        found = []
        if not isinstance(check, str) or not CHECK_ID.fullmatch(check):
            found.append(f"entry {i}: {check!r} is not a checkov Kubernetes check id (CKV_K8S_<n>)")
        elif check in skips:
            found.append(f"entry {i}: {check} is listed twice")
        if not isinstance(reason, str) or not reason.strip() or "\n" in reason.strip():
            found.append(f"entry {i}: {check!r} needs a one-line reason")
        if not found:
            skips[check] = reason.strip()
        problems += found
    if problems:
        raise SkipListError(f"{path}:\n- " + "\n- ".join(problems))
    return skips


def summary(results: Path) -> dict[str, int]:
    """checkov's summary from its JSON report (one framework: an object; several: a list)."""
    report = json.loads(results.read_text())
    reports = report if isinstance(report, list) else [report]
    keys = ("passed", "failed", "skipped", "resource_count")
    return {key: sum(r.get("summary", {}).get(key, 0) for r in reports) for key in keys}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.scan", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("skips", help="print the skipped check ids, comma-separated")
    counts = sub.add_parser("summary", help="print checkov's counts; exit 1 when it ran no check")
    counts.add_argument("results", type=Path, help="checkov's JSON report")
    args = parser.parse_args(argv)
    try:
        if args.command == "skips":
            print(",".join(load_skips()))
            return 0
    except SkipListError as err:
        print(err, file=sys.stderr)
        return 1
    found = summary(args.results)
    print("checkov: {resource_count} resources, {passed} checks passed, {failed} failed, {skipped} skipped".format(**found))
    if found["passed"] + found["failed"] == 0:
        print("checkov ran no check: it found nothing it knows how to scan", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
