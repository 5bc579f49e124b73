"""Reading DuckDB results safely."""

from __future__ import annotations

from typing import Any

import duckdb


def fetch_first(
    con: duckdb.DuckDBPyConnection, sql: str, parameters: list[Any] | None = None
) -> tuple[Any, ...] | None:
    """The first row of ``sql``, reading the result to its end so the connection is free.

    (A DuckDB connection refuses new work while a result is only partly fetched.)
    """
    rows = con.execute(sql, parameters).fetchall() if parameters else con.execute(sql).fetchall()
    return rows[0] if rows else None
