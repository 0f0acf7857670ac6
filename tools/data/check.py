"""`make check-data`: every row of a run's data read as its trainer will read it, before accelerator time.

Data on this machine (`path:`) is read whole, file by file, with the trainers' own reader and format
rules (admission/local_data.py); data staged in the cluster (a URL, a Hub dataset, a gs:// prefix) is
named and not read here: the report says so plainly, and the trainer checks its first rows at start-up.
The report: each bad row as file:row: column, what is wrong and what is allowed (up to `limit`, then a
count); rows; tokens per example through the model's real tokenizer and chat template (tokens.py),
against the sequence length, and the packing efficiency as the trainer packs (fill.py), or the lengths
in characters and why where no tokenizer is on this machine; the train/eval split the trainer will use
and warnings when the eval split takes every row, the rest is less than one batch, the data is smaller
than one epoch of the configured steps, or examples are longer than the sequence length; and a few
examples with the trained tokens marked.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from admission import local_data
from admission.check import stack_manifests
from tools.data import fill, tokens
from tools.data.split import run_split
from trainers.sft_data import formats, messages, parts

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
        return list(parts.example_of_read(spec, read, None).parts)
    out = []
    for i, m in enumerate(read.messages):
        trained = spec.loss_on == "all" or (m["role"] == formats.TRAINED_ROLE and i >= read.trained_from)
        out += [(f"<{m['role']}> ", False), (messages.shown(m), trained), ("\n", False)]
    return out


def check(config, run_name: str, limit: int = 20, examples: int = 3,
          progress: Callable[[int], None] | None = None, root: Path | None = None,
          tokenizer: Path | None = None) -> tuple[int, dict[str, Any]]:
    """(exit code, report) for one run of a loaded stack whose project directory is `root` (default: the
    current one); `tokenizer`: a Hugging Face tokenizer directory (default: the model's in the local
    Hugging Face cache, else the lengths are counted in characters)."""
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
    # A chat anywhere in the run's data needs the template; plain text alone needs only the tokenizer.
    data_format = next((d.spec.format for d in local if d.spec.format != "text"), "text")
    try:
        tok, where = tokens.load(tokenizer, split and split.hub_id, split and split.template, data_format)
    except tokens.TokenizerError as err:
        return EX_NOINPUT, {"run": run.name, "error": str(err)}
    seen = _Seen(local[0].spec, tok, examples, progress)
    per_source = [_read(data, seen) for data in local]
    seen.flush()
    extra = _mix_report(run, sources, per_source) if run.mix else {}
    return _report(run, local, split, seen, limit, where, extra)


def _read(data, seen: _Seen) -> int:
    """Every row of one source of the run's data into `seen`; its rows."""
    seen.spec = data.spec
    before = sum(seen.rows.values())
    for found in local_data.bad_rows(data, each=seen.each):
        if isinstance(found, tuple):
            seen.rows[found[0]] = found[1]
            seen.report_progress()
        elif found.unread:
            seen.unread.append(str(found))
        else:
            seen.bad.append(found)
            seen.tick(found.row)
    return sum(seen.rows.values()) - before


class _Seen:
    """What the read gathers: bad and unread files and rows, rows per file, each example's length in
    characters and (with a tokenizer) in tokens, and the first examples with their trained text marked.
    Examples are tokenized in chunks of CHUNK (tokens.Tokens.tokens_of_many); the progress bar moves a
    CHUNK of rows at a time."""

    CHUNK = 2048

    def __init__(self, spec: formats.Spec, tok: tokens.Tokens | None, examples: int,
                 progress: Callable[[int], None] | None = None):
        self.spec, self.tok, self.examples, self.progress = spec, tok, examples, progress
        self.bad, self.unread, self.rows, self.characters, self.tokens, self.shown = [], [], {}, [], [], []
        self.trained_tokens, self.pending, self.unreported = 0, [], 0

    def tick(self, row: int = 1) -> None:
        """One more row read (a bad row of `row` 0 is a file that can't be read: no row)."""
        self.unreported += bool(row)
        if self.unreported >= self.CHUNK:
            self.report_progress()

    def report_progress(self) -> None:
        if self.progress and self.unreported:
            self.progress(self.unreported)
        self.unreported = 0

    def each(self, name: str, row: int, read: formats.Record) -> None:
        self.tick()
        text = marked(self.spec, read)
        self.characters.append(sum(len(t) for t, _ in text))
        if self.tok is None:
            if len(self.shown) < self.examples:
                self.shown.append({"file": name, "row": row, "parts": text})
            return
        try:
            self.pending.append((name, row, self.tok.example(self.spec, read, row)))
        except formats.FormatError as err:  # the chat template refuses the row, as in the trainer
            self.bad.append(local_data.BadRow(name, row, str(err).removeprefix(f"row {row}: ")))
        if len(self.pending) >= self.CHUNK:
            self.flush()

    def flush(self) -> None:
        counted = self.tok.tokens_of_many([e for _, _, e in self.pending]) if self.pending else []
        for (name, row, _), (ids, trained) in zip(self.pending, counted):
            self.tokens.append(len(ids))
            self.trained_tokens += sum(trained)
            if len(self.shown) < self.examples:
                self.shown.append({"file": name, "row": row, "parts": self.tok.marked(ids, trained),
                                   "tokens": len(ids), "trained_tokens": sum(trained)})
        self.pending = []


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


def _report(run, local, split, seen: _Seen, limit: int, where: str, extra: dict) -> tuple[int, dict]:
    total = extra.get("mixed_rows", sum(seen.rows.values()))
    formats_read = ", ".join(dict.fromkeys(data.spec.format for data in local))
    report: dict[str, Any] = {
        "run": run.name, "format": formats_read, "loss": local[0].spec.loss_on, "files": seen.rows, "rows": total,
        **extra,
        "bad_rows": [str(b) for b in seen.bad[:limit]], "bad_rows_total": len(seen.bad), "unread": seen.unread,
        "characters": _lengths(seen.characters), "examples": seen.shown, "warnings": [],
        "lengths_in": "tokens" if seen.tok else "characters",
        "tokenizer": where if seen.tok else None,
    }
    if seen.tok is None:
        report["tokens_not_counted"] = where
    if split is not None:
        held, train = split.eval_rows(total), split.train_rows(total)
        report["split"] = {"eval_rows": held, "train_rows": train, "batch": split.batch, "steps": split.steps,
                           "how": split.how}
        report["warnings"] += _split_warnings(held, train, total, split)
    if seen.tok is not None and seen.tokens:
        report["tokens"] = _token_figures(seen, split)
        report["warnings"] += _token_warnings(report["tokens"], split)
    code = EX_DATAERR if seen.bad else EX_UNAVAILABLE if seen.unread and not total else EX_OK
    return code, report


def _token_figures(seen: _Seen, split) -> dict[str, Any]:
    figures: dict[str, Any] = {**_lengths(seen.tokens), "total": sum(seen.tokens), "trained": seen.trained_tokens}
    if split is None:
        return figures
    limit = split.max_length
    longer = sum(1 for n in seen.tokens if limit and n > limit)
    figures.update(sequence_length=limit, longer=longer, longer_fraction=round(longer / len(seen.tokens), 4),
                   longer_means=("dropped by the trainer (--max_length)" if split.gpu else
                                 "split across rows by the trainer (each piece after a BOS of its own)"))
    # The JAX trainer holds out its first records; the GPU trainer a seeded fraction of all (left in here).
    filled = fill.fill(split, seen.tokens if split.gpu else seen.tokens[split.eval_first:])
    if filled is not None:
        figures["packing"] = {"efficiency": round(filled.efficiency, 4), "sequences": filled.sequences,
                              "how": filled.how}
    return figures


def _token_warnings(figures: dict, split) -> list[str]:
    warnings = []
    if figures.get("longer") and split.gpu:
        warnings.append(f"{figures['longer']} examples ({figures['longer_fraction']:.1%}) are longer than "
                        f"--max_length={split.max_length} tokens: the GPU trainer drops them; raise --max_length "
                        "or shorten them")
    elif figures.get("longer"):
        warnings.append(f"{figures['longer']} examples ({figures['longer_fraction']:.1%}) are longer than a row "
                        f"of --maxlen={split.max_length} tokens: the JAX trainer splits them, and a later piece "
                        "is trained without the text before it; raise --maxlen")
    packing = figures.get("packing")
    if packing and split.gpu and not split.packs and packing["efficiency"] < 0.5:
        warnings.append(f"{1 - packing['efficiency']:.0%} of the tokens the GPU trainer computes on are padding: "
                        "--packing true packs examples into rows instead (bfd)")
    return warnings


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
