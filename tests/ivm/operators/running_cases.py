"""Shared helpers of the RunningAggregate tests: scripted epochs and the recompute count."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from oracle.harness import Epoch, Harness

FORMATS = ("weighted", "debezium", "delta", "rows")


def recomputed(harness: Harness, view: str) -> int:
    """Groups of ``view`` whose running state its last epoch recomputed from their rows.

    Read from the operator's versions scratch table (embedded mode), where each new
    version says whether it was recomputed (``__recomputed``): what was computed, not
    how long it took.
    """
    con = harness.db._con  # the epoch's own connection: its scratch tables are temporary
    tables = [row[0] for row in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE temporary ORDER BY table_name"
    ).fetchall()]
    prefix = f"__ivm_tmp_{view}#"
    (table,) = [t for t in tables if t.startswith(prefix) and t.endswith("_versions")]
    quoted = '"' + table.replace('"', '""') + '"'
    (count,) = con.execute(f"SELECT count(*) FROM {quoted} WHERE __recomputed").fetchone()
    return int(count)


def value(harness: Harness, view: str, column: str, **where: Any) -> Any:
    """One value of ``view``: from its only row, or the row matching ``where``."""
    rows = harness.db.read(view).to_pylist()
    rows = [r for r in rows if all(r[k] == v for k, v in where.items())]
    assert len(rows) == 1, rows
    return rows[0][column]


def script(
    tables: Sequence[str],
    views: dict[str, str],
    epochs: Sequence[dict[str, list[Any]]],
    check: Callable[[int, Harness], None] | None = None,
) -> None:
    """Apply ``epochs`` one at a time, each checked by the harness against DuckDB (and in
    each batch format in turn); ``check(i, harness)`` asserts more after epoch ``i``."""
    harness = Harness(list(tables))
    try:
        harness.create_views(views)
        for i, ops in enumerate(epochs):
            harness.apply(Epoch.of(ops, fmt=FORMATS[i % len(FORMATS)], variant=i))
            if check is not None:
                check(i, harness)
    finally:
        harness.close()
