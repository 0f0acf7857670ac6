"""Copies each object of an old prefix to its new one with Cloud Storage's own rewrite, and verifies it.

`Blob.rewrite` is objects.rewrite: Cloud Storage copies the bytes itself, in rounds for a large object (the token
resumes the next round), and the destination appears only once complete
(https://cloud.google.com/storage/docs/json_api/v1/objects/rewrite). The copy is verified against the object
metadata: `crc32c` always, `md5Hash` where both objects have one (a composite object has none)
(https://cloud.google.com/storage/docs/data-validation). google-cloud-storage uses anonymous credentials where
STORAGE_EMULATOR_HOST names an emulator (google/cloud/storage/client.py `Client.__init__`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from google.cloud.storage.retry import DEFAULT_RETRY

from tools.migrate.bar import Bar
from tools.migrate.plan import Move

# Each request retried on Google's transient errors for at most a minute (the client's default is two): an
# unreachable endpoint is said within that. The rewrite of an object that exists nowhere yet
# (if_generation_match=0) is idempotent, so retried too.
RETRY = DEFAULT_RETRY.with_timeout(60)


@dataclass
class Outcome:
    copied: list[str] = field(default_factory=list)
    verified: list[str] = field(default_factory=list)  # there already, with the source's checksum
    conflicts: list[str] = field(default_factory=list)  # there already with other content: left alone
    failed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.conflicts or self.failed)


def same(source, copy) -> bool:
    """The copy's checksums from its metadata are the source's: CRC32C, and MD5 where both have one."""
    if copy is None or source.crc32c != copy.crc32c or source.size != copy.size:
        return False
    return source.md5_hash is None or copy.md5_hash is None or source.md5_hash == copy.md5_hash


@dataclass(frozen=True)
class Pair:
    source: object  # a google.cloud.storage Blob
    destination: str  # its new name


class Migration:
    """The copies of `moves` in `bucket` (a google.cloud.storage Bucket)."""

    def __init__(self, bucket, moves: Iterable[Move]):
        self.bucket, self.moves = bucket, list(moves)

    def _listed(self, prefix: str) -> dict:
        return {b.name: b for b in self.bucket.list_blobs(prefix=f"{prefix}/", retry=RETRY)}

    def pairs(self) -> tuple[list[Pair], dict]:
        """Every source object and its destination's name; and the destinations that exist, by name."""
        pairs, there = [], {}
        for move in self.moves:
            sources = self._listed(move.source)
            if sources:
                there.update(self._listed(move.destination))
            pairs += [Pair(blob, move.destination + name[len(move.source):]) for name, blob in sorted(sources.items())]
        return pairs, there

    def run(self, bar_out, delete_source: bool = False) -> Outcome:
        pairs, there = self.pairs()
        outcome = Outcome()
        bar = Bar(sum(p.source.size or 0 for p in pairs), len(pairs), bar_out)
        for pair in pairs:
            existing = there.get(pair.destination)
            if existing is not None:
                (outcome.verified if same(pair.source, existing) else outcome.conflicts).append(pair.destination)
                bar.advance(pair.source.size or 0, 1)
                continue
            self._copy(pair, bar, outcome)
        bar.close()
        if delete_source and outcome.ok:
            for pair in pairs:
                pair.source.delete(if_generation_match=pair.source.generation, retry=RETRY)
                outcome.deleted.append(pair.source.name)
        return outcome

    def _copy(self, pair: Pair, bar: Bar, outcome: Outcome) -> None:
        destination = self.bucket.blob(pair.destination)
        token, done = None, 0
        try:
            while True:
                # Only where nothing is yet: an object the run wrote meanwhile is never overwritten.
                token, rewritten, _total = destination.rewrite(pair.source, token=token, if_generation_match=0,
                                                               retry=RETRY)
                bar.advance(rewritten - done)
                done = rewritten
                if token is None:
                    break
            destination.reload(retry=RETRY)
        except Exception as err:  # pylint: disable=broad-except  # named, and the next run copies it again
            outcome.failed.append(f"{pair.destination}: {type(err).__name__}: {err}")
            bar.advance(0, 1)
            return
        bar.advance(0, 1)
        if same(pair.source, destination):
            outcome.copied.append(pair.destination)
            return
        outcome.failed.append(f"{pair.destination}: its crc32c {destination.crc32c} (md5 {destination.md5_hash}) is "
                              f"not the source's {pair.source.crc32c} ({pair.source.md5_hash}): removed, to be copied "
                              "again")
        destination.delete(if_generation_match=destination.generation, retry=RETRY)  # this copy, never the source
