"""The progress bar of `make migrate`: bytes copied of the total, objects, on one line (a terminal) or one line
per tenth (a log)."""

from __future__ import annotations

import sys
from typing import TextIO

WIDTH = 30


def size(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.2f} GiB"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def line(done_bytes: int, total_bytes: int, done_objects: int, total_objects: int) -> str:
    share = done_bytes / total_bytes if total_bytes else (1.0 if done_objects >= total_objects else 0.0)
    filled = int(WIDTH * share)
    return (f"[{'#' * filled}{'.' * (WIDTH - filled)}] {100 * share:5.1f}%  {size(done_bytes)} of {size(total_bytes)}, "
            f"{done_objects} of {total_objects} objects")


class Bar:
    def __init__(self, total_bytes: int, total_objects: int, out: TextIO = sys.stderr):
        self.total_bytes, self.total_objects, self.out = total_bytes, total_objects, out
        self.done_bytes = self.done_objects = 0
        self.tty, self.tenth = out.isatty(), -1

    def advance(self, nbytes: int = 0, objects: int = 0) -> None:
        self.done_bytes += nbytes
        self.done_objects += objects
        text = line(self.done_bytes, self.total_bytes, self.done_objects, self.total_objects)
        if self.tty:
            self.out.write(f"\r{text}")
        else:
            share = self.done_bytes / self.total_bytes if self.total_bytes else 1.0
            tenth = 10 if self.done_objects >= self.total_objects else min(int(10 * share), 9)
            if tenth > self.tenth:
                self.tenth = tenth
                self.out.write(text + "\n")
        self.out.flush()

    def close(self) -> None:
        if self.tty:
            self.out.write("\n")
            self.out.flush()
