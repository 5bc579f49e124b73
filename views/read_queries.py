"""The one check on a query users run through ``sql()``: it only reads."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from ivm.errors import SqlError
from ivm.sql_frontend.parsing import parse_error, plain
from ivm.sql_frontend.positions import TEXT_START


def check_read_query(query: str) -> None:
    """Raise SqlError unless ``query`` is one read-only query (SELECT / WITH / set operation)."""
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


__all__ = ["check_read_query"]
