"""`make check-data`: every row of a run's data read as its trainer will read it, before accelerator time.

Data on this machine (`path:`) is read whole, file by file, with the trainers' own reader and format
rules (admission/local_data.py); data staged in the cluster (a URL, a Hub dataset, a gs:// prefix) is
named and not read here: the report says so plainly, and the trainer checks its first rows at start-up.
The report: each bad row as file:row: column, what is wrong and what is allowed (up to `limit`, then a
count); rows and example lengths; the train/eval split the trainer will use and warnings when the eval
split takes every row, the rest is less than one batch, or the data is smaller than one epoch of the
configured steps; and a few examples with the trained text marked.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from admission import local_data
from admission.check import stack_manifests
from tools.data.split import run_split
from trainers.sft_data import formats, messages

EX_OK, EX_DATAERR, EX_NOINPUT, EX_UNAVAILABLE, EX_CONFIG = 0, 65, 66, 69, 78


def _container_args(manifest) -> list[str]:
    return list(manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
                .get("args", []))


def _source_of(config, run) -> str:
    if getattr(run, "mix", ()):  # a run's, or (a source of it) none
        return "; ".join(_source_of(config, source) for source in run.mix)
    name = (run.data or "").split("/", 1)[0]
    dataset = next((d for d in config.datasets if d.name == name), None)
    if dataset is None:
        return f"datasets/{config.stack}/{run.data} in the bucket, staged by no dataset of this stack"
    return {"url": f"URL {dataset.url}", "hub": f"Hub dataset {dataset.hub.id}" if dataset.hub else "",
            "mounted": f"gs:// prefix {dataset.gcs}"}.get(dataset.kind, dataset.kind)


def _lengths(values: list[int]) -> dict[str, int]:
    if not values:
        return {}
    ordered = sorted(values)
    return {"p50": int(statistics.median(ordered)), "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            "max": ordered[-1]}


def marked(spec: formats.Spec, read: formats.Record) -> list[tuple[str, bool]]:
    """A record's text as (text, trained) parts; a chat as its turns, the trained ones marked (the chat
    template that wraps them is the model's, applied by the trainer)."""
    if not read.chat:
        return [(text, trained or spec.loss_on == "all") for text, trained in read.plain]
    out = []
    for i, m in enumerate(read.messages):
        trained = spec.loss_on == "all" or (m["role"] == formats.TRAINED_ROLE and i >= read.trained_from)
        out += [(f"<{m['role']}> ", False), (messages.shown(m), trained), ("\n", False)]
    return out


def check(config, run_name: str, limit: int = 20, examples: int = 3,
          progress: Callable[[int], None] | None = None, root: Path | None = None) -> tuple[int, dict[str, Any]]:
    """(exit code, report) for one run of a loaded stack whose project directory is `root` (default: the
    current one)."""
    run = next((r for r in config.runs if r.name == run_name), None)
    if run is None:
        return EX_NOINPUT, {"error": f"run {run_name!r} is not one of stack {config.stack}'s runs: "
                                     f"{', '.join(r.name for r in config.runs) or '(none)'}"}
    sources = local_data.local_sources(config, run, root)
    local = [data for _, _, data in sources if data is not None]
    if not local:
        why = ("runs its own container, which reads its own data" if run.trainer is None else
               f"reads {_source_of(config, run)}, staged in the cluster and not read on this machine: "
               "its trainer checks the first 100 rows at start-up (a `path:` dataset is read here whole)")
        return EX_UNAVAILABLE, {"run": run.name, "error": f"run {run.name!r} {why}"}
    contract = config.contracts()[run.pool]
    gpus = (run.chips_per_host or contract.chips_per_host) * contract.hosts_per_slice * contract.slices
    split = run_split(run, _container_args(stack_manifests(config)[run.name]), gpus)
    bad, unread, rows, lengths, shown, per_source = [], [], {}, [], [], []
    for data in local:
        def each(name: str, row: int, read: formats.Record, spec=data.spec) -> None:
            text = marked(spec, read)
            lengths.append(sum(len(t) for t, _ in text))
            if len(shown) < examples:
                shown.append({"file": name, "row": row, "parts": text})

        before = sum(rows.values())
        for found in local_data.bad_rows(data, each=each):
            if isinstance(found, tuple):
                rows[found[0]] = found[1]
                if progress:
                    progress(found[1])
            elif found.unread:
                unread.append(str(found))
            else:
                bad.append(found)
        per_source.append(sum(rows.values()) - before)
    report = _mix_report(run, sources, per_source) if run.mix else {}
    return _report(run, local, split, bad, unread, rows, lengths, shown, limit, report)


def _mix_report(run, sources, per_source: list[int]) -> dict[str, Any]:
    """Each source of the run's mix: its rows here and share; the rows the mix holds (it ends where the first
    source runs out: trainers/sft_data/mixture.py), when every source is read here."""
    weights = [s.weight for s in run.mix]
    rows = iter(per_source)
    mix = [{"data": value, "weight": w, "format": (data.spec.format if data else None),
            "rows": next(rows) if data else None} for (_, value, data), w in zip(sources, weights)]
    report: dict[str, Any] = {"mix": mix, "not_read": [f"{key}: {value!r} is staged in the cluster, not read here; "
                                                       "its trainer checks its first rows at start-up"
                                                       for key, value, data in sources if data is None]}
    if all(m["rows"] is not None for m in mix):
        report["mixed_rows"] = int(min(m["rows"] * sum(weights) / m["weight"] for m in mix))
    return report


def _report(run, local, split, bad, unread, rows, lengths, shown, limit, extra) -> tuple[int, dict]:
    total = extra.get("mixed_rows", sum(rows.values()))
    formats_read = ", ".join(dict.fromkeys(data.spec.format for data in local))
    report: dict[str, Any] = {
        "run": run.name, "format": formats_read, "loss": local[0].spec.loss_on, "files": rows, "rows": total, **extra,
        "bad_rows": [str(b) for b in bad[:limit]], "bad_rows_total": len(bad), "unread": unread,
        "characters": _lengths(lengths), "examples": shown, "warnings": [],
        "tokens": "not counted: the model's tokenizer is not loaded by this check",
    }
    if split is not None:
        held, train = split.eval_rows(total), split.train_rows(total)
        report["split"] = {"eval_rows": held, "train_rows": train, "batch": split.batch, "steps": split.steps,
                           "how": split.how}
        report["warnings"] += _split_warnings(held, train, total, split)
    code = EX_DATAERR if bad else EX_UNAVAILABLE if unread and not total else EX_OK
    return code, report


def _split_warnings(held: int, train: int, total: int, split) -> list[str]:
    warnings = []
    if held >= total:
        warnings.append(f"the eval split takes {held} rows and the data has {total}: nothing is left to train "
                        "on; lower --eval_stories (JAX) or --eval_fraction (GPU)")
    elif train < split.batch:
        warnings.append(f"{train} rows are left to train on, less than one batch of {split.batch}")
    elif split.steps and train < split.steps * split.batch:
        warnings.append(f"{split.steps} steps of {split.batch} take {split.steps * split.batch} examples and "
                        f"{train} rows are left to train on: the data is repeated "
                        f"{split.steps * split.batch / train:.1f} times (for the JAX trainer, rows pack several "
                        "short examples: fewer repeats)")
    return warnings
