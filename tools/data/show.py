"""The check-data report as text: trained text in colour on a terminal, in [[brackets]] otherwise."""

from __future__ import annotations

from collections.abc import Mapping

GREEN, RESET = "\033[32m", "\033[0m"


def mark(parts, color: bool) -> str:
    out = []
    for text, trained in parts:
        if trained and text:
            out.append(f"{GREEN}{text}{RESET}" if color else f"[[{text}]]")
        else:
            out.append(text)
    return "".join(out)


def render(report: Mapping, color: bool = False) -> str:
    lines = [f"run {report['run']}: format {report['format']}, loss {report['loss']}"]
    lines += [f"  {name}: {rows} rows" for name, rows in report["files"].items()]
    for m in report.get("mix", ()):
        read = f"{m['rows']} rows" if m["rows"] is not None else "not read here"
        lines.append(f"  mix: {m['data']} (weight {m['weight']:g}, format {m['format'] or '?'}): {read}")
    lines += [f"  not read: {n}" for n in report.get("not_read", ())]
    if "mixed_rows" in report:
        lines.append(f"  {report['rows']} rows in the mix (it ends where the first source runs out)")
    else:
        lines.append(f"  {report['rows']} rows in all")
    lines += [f"  not read: {u}" for u in report["unread"]]
    if report["bad_rows_total"]:
        lines.append(f"bad rows ({report['bad_rows_total']}):")
        lines += [f"  {b}" for b in report["bad_rows"]]
        more = report["bad_rows_total"] - len(report["bad_rows"])
        if more:
            lines.append(f"  ... and {more} more")
    if report["characters"]:
        c = report["characters"]
        lines.append(f"characters per example: p50 {c['p50']}, p95 {c['p95']}, max {c['max']}; tokens "
                     f"{report['tokens']}")
    if "split" in report:
        s = report["split"]
        lines.append(f"split: {s['train_rows']} rows to train, {s['eval_rows']} held out ({s['how']})")
    lines += [f"WARNING: {w}" for w in report["warnings"]]
    for e in report["examples"]:
        lines.append(f"--- {e['file']}:{e['row']} (trained text {'in green' if color else 'in [[ ]]'})")
        lines.append(mark(e["parts"], color))
    return "\n".join(lines)
