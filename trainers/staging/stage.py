"""Stage one dataset: fetch what its source lists into the mounted prefix, unless it is there already.

    python -m trainers.staging --source '{"kind": "url", "url": "https://.../TinyStories-train.txt"}' \\
        --dest /datasets/tinystories [--token-file /var/run/secrets/huggingface/token]

Idempotent: `.staged.json` beside the files records the source and each
file's size and SHA-256; a second run with the same source finds every file
at its recorded size and copies nothing. A changed source (another URL,
revision or filter) stages anew. Exit codes: 0 staged (or already there),
78 a source no retry can fix (not found, no access, checksum mismatch,
bad spec), 1 anything else (the Job retries).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainers.exit_codes import CONFIG_ERROR
from trainers.staging import sources
from trainers.staging.transfer import TransferError, fetch, log

MANIFEST = ".staged.json"


def _listing(spec: dict, token: str | None) -> tuple[str | None, list[sources.Remote]]:
    kind = spec.get("kind")
    if kind == "url":
        return None, sources.url_files(spec)
    if kind == "hub":
        return sources.hub_files(spec, token)
    if kind == "mounted":
        return None, sources.mounted_files(spec)
    raise sources.SourceError(f"source kind {kind!r}; allowed: url, hub, mounted")


def _recorded(dest: Path) -> dict:
    try:
        return json.loads((dest / MANIFEST).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _already_there(record: dict, remote: sources.Remote, dest: Path) -> dict | None:
    entry = next((f for f in record.get("files", []) if f["name"] == remote.name), None)
    path = dest / remote.name
    if entry and path.is_file() and path.stat().st_size == entry["size"]:
        return entry
    return None


def stage(spec: dict, dest: Path, token: str | None = None) -> dict:
    """Stage `spec` into `dest`; returns the manifest written (or found)."""
    resolved, remotes = _listing(spec, token)
    record = _recorded(dest)
    same_source = record.get("source") == spec and record.get("resolved") == resolved
    files, copied = [], 0
    for remote in remotes:
        found = _already_there(record, remote, dest) if same_source else None
        if found:
            log(f"[stage] {remote.name}: already staged ({found['size']} bytes, sha256 {found['sha256'][:12]}…)")
            files.append(found)
            continue
        files.append(fetch(remote, dest, token))
        copied += 1
    manifest = {"source": spec, "resolved": resolved, "files": files}
    if copied or not same_source:
        partial = dest / (MANIFEST + ".partial")
        partial.write_text(json.dumps(manifest, indent=2, sort_keys=True))
        partial.replace(dest / MANIFEST)
    log(f"[stage] {dest}: {copied} file(s) copied, {len(files) - copied} already there")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers.staging", description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    parser.add_argument("--source", required=True, help="the source, as JSON (kind: url | hub | mounted)")
    parser.add_argument("--dest", required=True, type=Path, help="the dataset's directory on the bucket mount")
    parser.add_argument("--token-file", type=Path, help="a Hugging Face token, for gated or private datasets")
    args = parser.parse_args(argv)
    try:
        spec = json.loads(args.source)
        token = args.token_file.read_text().strip() if args.token_file else None
        args.dest.mkdir(parents=True, exist_ok=True)
        stage(spec, args.dest, token)
    except (sources.SourceError, json.JSONDecodeError, KeyError) as err:
        log(f"[stage] cannot stage from {args.source}: {err}")
        return CONFIG_ERROR
    except (TransferError, OSError) as err:  # urllib's URLError is an OSError
        log(f"[stage] transfer failed, the Job retries: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
