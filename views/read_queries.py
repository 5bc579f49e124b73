"""The checks on a query users run through ``sql()``: it only reads; and for a query
served to other processes (``db.serve``), it reads only the state's tables and views."""

from __future__ import annotations

from collections.abc import Iterable

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from ivm.errors import SqlError
from ivm.sql_frontend.parsing import parse_error, plain
from ivm.sql_frontend.positions import TEXT_START

TABLE_FUNCTIONS = (exp.GenerateSeries, exp.Unnest)
"""Table functions a served query may read from: they compute rows, reading no file."""

HOST_FUNCTIONS = frozenset({
    "getenv", "glob", "sniff_csv", "query", "query_table", "current_setting",
    "parquet_metadata", "parquet_schema", "parquet_file_metadata", "parquet_kv_metadata",
    "parquet_bloom_probe", "duckdb_settings", "duckdb_secrets", "duckdb_extensions",
    "which_secret",
})
"""Functions (besides ``read_*`` and ``*_scan``) that read the serving host's files,
environment, settings or arbitrary SQL text."""


def check_read_query(query: str) -> exp.Query:
    """Raise SqlError unless ``query`` is one read-only query (SELECT / WITH / set
    operation); returns its tree."""
    if not isinstance(query, str):
        raise SqlError(f"sql() takes SQL text, not {type(query).__name__}")
    try:
        trees = sqlglot.parse(query, read="duckdb")
    except ParseError as error:  # its position and words, without terminal escape codes
        raise parse_error(error, query, TEXT_START) from error
    except SqlglotError as error:
        raise SqlError(f"cannot parse query: {plain(str(error))}") from error
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise SqlError("sql() runs one read-only query (SELECT / WITH / set operation)")
    return trees[0]


def check_served_query(query: str, names: Iterable[str]) -> None:
    """Raise SqlError unless ``query`` is one read-only query that reads only ``names``
    (the state's tables and views; names ignore case) and its own CTEs: never a file, a
    path DuckDB would scan (``FROM 'x.csv'``), a table function other than ``range`` /
    ``generate_series`` / ``unnest``, or a function reading the host's environment.

    A served query comes from another process or host (``db.serve``): the server's
    DuckDB can read every file its process can, so the reader is held to the state.
    (``db.sql`` is the session's own process, which could read those files anyway.)
    """
    tree = check_read_query(query)
    known = {name.lower() for name in names}
    known |= {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if isinstance(table.this, TABLE_FUNCTIONS):
            continue
        if not isinstance(table.this, exp.Identifier):
            function = table.this.sql_name() if isinstance(table.this, exp.Func) else ""
            called = table.this.name if isinstance(table.this, exp.Anonymous) else function
            raise SqlError(
                f"a served query reads only the state's tables and views, not the table "
                f"function {called.lower()}()"
            )
        if table.catalog or table.db.lower() not in {"", "main"} or table.name.lower() not in known:
            raise SqlError(
                f"a served query reads only the state's tables and views: no table or view "
                f"named {table.sql(dialect='duckdb')}"
            )
    for call in tree.find_all(exp.Func):
        name = (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).lower()
        if name in HOST_FUNCTIONS or name.startswith("read_") or name.endswith("_scan"):
            raise SqlError(f"a served query may not call {name}(): it reads the server's host")


__all__ = ["check_read_query", "check_served_query"]
