"""The run commands' shared steps: the stack file read and the run checked, the cluster reached, errors
turned into one line and the exit code `make status` uses for the same case (tools/status/__main__.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from stack.config import StackConfig
from stack.places import run_place, stack_run_links
from stack.problems import ConfigError
from stack.queueing import withdrawn
from stack.reader import load_files
from tools.status.context import ContextMissing
from tools.status.sources import ClusterUnreachable, NotDeployed

EX_USAGE, EX_NOINPUT, EX_UNAVAILABLE, EX_CONFIG = 64, 66, 69, 78


class CommandError(Exception):
    """A one-line message and the exit code it ends with."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def stack_config(stack: str, root: Path, command: str) -> StackConfig:
    try:
        return load_files(stack, root)
    except ConfigError as err:
        raise CommandError(f"{command}: stack {stack}: {err}", EX_CONFIG) from None


def the_run(config: StackConfig, run: str | None, command: str):
    """The run named (or the stack's only run)."""
    names = [r.name for r in config.runs]
    if run is None and len(names) == 1:
        run = names[0]
    if run is None:
        raise CommandError(f"{command}: stack {config.stack} has {len(names)} runs; say which: RUN=<run> "
                           f"({', '.join(names) or 'none'})", EX_USAGE)
    found = next((r for r in config.runs if r.name == run), None)
    if found is None:
        raise CommandError(f"{command}: {run!r} is not a run of stack {config.stack}; runs: "
                           f"{', '.join(names) or '(none)'}", EX_NOINPUT)
    return found


def withdrawn_runs(config: StackConfig) -> set[str]:
    contracts = config.contracts()
    return {r.name for r in config.runs if withdrawn(r, contracts)}


def connect(config: StackConfig, context: str | None, command: str):
    from tools.runs.cluster import RunCluster  # pylint: disable=import-outside-toplevel

    try:
        return RunCluster(config, context)
    except ContextMissing as err:
        raise CommandError(f"{command}: {err}", EX_CONFIG) from None
    except ClusterUnreachable as err:
        raise CommandError(f"{command}: the cluster of stack {config.stack} cannot be reached: {err}",
                           EX_UNAVAILABLE) from None


def guarded(command: str, config: StackConfig, body: Callable[[], int]) -> int:
    """`body()`, with a cluster that stops answering or a stack with nothing deployed as one line."""
    try:
        return body()
    except ClusterUnreachable as err:
        raise CommandError(f"{command}: the cluster of stack {config.stack} cannot be reached: {err}",
                           EX_UNAVAILABLE) from None
    except NotDeployed as err:
        raise CommandError(f"{command}: stack {config.stack} has nothing deployed here: {err}", EX_NOINPUT) from None


def finish(main: Callable[[], int]) -> int:
    try:
        return main()
    except CommandError as err:
        print(err, file=sys.stderr, flush=True)
        return err.code
    except KeyboardInterrupt:
        return 130


__all__ = ["CommandError", "connect", "finish", "guarded", "run_place", "stack_config", "stack_run_links",
           "the_run", "withdrawn_runs"]
