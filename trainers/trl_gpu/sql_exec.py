"""Execution accuracy: does the generated query return what the reference returns?

Each row's `sql_context` (CREATE TABLE and INSERT statements in the text-to-SQL
dataset) builds a fresh in-memory SQLite database; the reference and the
generated query both run on it and their result sets are compared. Rows are
compared as a multiset (order ignored) unless the reference orders them
(`ORDER BY` at its top level), and values by type and value (1 and 1.0 agree,
as SQLite compares them). A generated query that fails to run is a miss; a
row whose context or reference does not run on SQLite is "unscorable" and
left out of the score rather than counted against the model.

Standard library only (sqlite3), with a cap on the work one query may do.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter

# SQLite's progress handler runs every this many virtual-machine instructions;
# a query still running after MAX_STEPS of them is stopped (a cross join gone wild).
_PROGRESS_EVERY = 1000
MAX_STEPS = 20_000
MAX_ROWS = 10_000


class QueryFailed(Exception):
    pass


def _connect(context: str) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.executescript(context)
    return conn


def _run(conn: sqlite3.Connection, query: str) -> sqlite3.Cursor:
    steps = [0]

    def progress() -> int:
        steps[0] += 1
        return 1 if steps[0] > MAX_STEPS else 0  # non-zero aborts the query

    conn.set_progress_handler(progress, _PROGRESS_EVERY)
    try:
        return conn.execute(query.strip().rstrip(";"))  # one statement: sqlite3 refuses several
    finally:
        conn.set_progress_handler(None, 0)


def _fetch(cursor: sqlite3.Cursor) -> list[tuple]:
    rows = cursor.fetchmany(MAX_ROWS + 1)
    if len(rows) > MAX_ROWS:
        raise QueryFailed(f"more than {MAX_ROWS} rows")
    return rows


def _tables(conn: sqlite3.Connection) -> list[tuple]:
    """Every table's rows, for statements that change data rather than return it."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    return [(name, sorted(map(repr, conn.execute(f'SELECT * FROM "{name}"')))) for name in names]


def outcome(context: str, query: str) -> tuple[str, list]:
    """("rows", result) of a query, or ("tables", contents after it) of a
    statement that returns nothing (INSERT, UPDATE, DELETE), on a fresh database.
    Raises sqlite3.Error for a bad context, QueryFailed for a bad query."""
    conn = _connect(context)
    try:
        try:
            cursor = _run(conn, query)
            if cursor.description is None:
                return "tables", _tables(conn)
            return "rows", _fetch(cursor)
        except (sqlite3.Error, sqlite3.Warning, ValueError) as err:
            raise QueryFailed(str(err)) from err
    finally:
        conn.close()


def _ordered(query: str) -> bool:
    # ORDER BY outside parentheses: the order of the result is part of the answer.
    depth, top = 0, []
    for char in query:
        depth += char == "("
        depth -= char == ")"
        top.append(char if depth == 0 else " ")
    return re.search(r"\border\s+by\b", "".join(top), re.IGNORECASE) is not None


def _key(value):
    # SQLite compares 1 and 1.0 equal; Python's tuple sort would too, but not
    # None against numbers, so each value gets a sortable, comparable key.
    if value is None:
        return (0, "")
    if isinstance(value, (int, float)):
        return (1, float(value))
    if isinstance(value, bytes):
        return (3, value.hex())
    return (2, str(value))


def same_result(reference: list[tuple], generated: list[tuple], ordered: bool) -> bool:
    ref = [tuple(_key(v) for v in row) for row in reference]
    gen = [tuple(_key(v) for v in row) for row in generated]
    return ref == gen if ordered else Counter(ref) == Counter(gen)


def execution_match(context: str, reference: str, generated: str) -> bool | None:
    """True/False: the generated query has the reference's effect or not (same
    result set, or the same tables after a data change); None: the row cannot
    be scored (its context or reference fails on SQLite)."""
    try:
        expected_kind, expected = outcome(context, reference)
    except (sqlite3.Error, sqlite3.Warning, ValueError, QueryFailed):
        return None
    try:
        got_kind, got = outcome(context, generated)
    except QueryFailed:
        return False
    if got_kind != expected_kind:
        return False
    if expected_kind == "tables":
        return expected == got
    return same_result(expected, got, _ordered(reference))
