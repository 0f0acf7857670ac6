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
    lines += _lengths(report)
    if "split" in report:
        s = report["split"]
        lines.append(f"split: {s['train_rows']} rows to train, {s['eval_rows']} held out ({s['how']})")
    lines += [f"WARNING: {w}" for w in report["warnings"]]
    for e in report["examples"]:
        counts = f", {e['tokens']} tokens, {e['trained_tokens']} trained" if "tokens" in e else ""
        lines.append(f"--- {e['file']}:{e['row']} (trained {'tokens' if counts else 'text'} "
                     f"{'in green' if color else 'in [[ ]]'}{counts})")
        lines.append(mark(e["parts"], color))
    return "\n".join(lines)


def _lengths(report: Mapping) -> list[str]:
    c, t = report["characters"], report.get("tokens")
    if not c:
        return []
    if t is None:
        return [f"characters per example: p50 {c['p50']}, p95 {c['p95']}, max {c['max']} (lengths in characters, "
                f"not tokens: {report.get('tokens_not_counted', 'no tokenizer')})"]
    lines = [f"tokens per example ({report['tokenizer']}): p50 {t['p50']}, p95 {t['p95']}, max {t['max']}; "
             f"{t['total']} in all, {t['trained']} trained"]
    if t.get("sequence_length"):
        lines.append(f"  longer than the sequence length of {t['sequence_length']}: {t['longer']} "
                     f"({t['longer_fraction']:.2%}), {t['longer_means']}")
    if "packing" in t:
        p = t["packing"]
        lines.append(f"  packing efficiency {p['efficiency']:.1%} (real tokens of those computed on): {p['how']}")
    return lines
