"""SQL of a read of state (``Run.read``) where the state is rows in DuckDB.

An executor whose traces are DuckDB tables, and a recursion's child run whose traces
grow within an epoch (a table plus an accumulator), render a read as SQL here: the
rows of a relation, restricted to the rows at some keys, and consolidated for a read
of the live rows. This is the one place that spells "the rows at these keys" and "the
live rows" in SQL; operators only ever ask for them through ``Run.read``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ivm.operators.base import At
from ivm.plan.sql import W, column_list, consolidate_sql
from ivm.schema import quote


def read_sql(source: str, names: Sequence[str], at: At | None = None, live: bool = False) -> str:
    """The rows of ``source`` (SQL of a relation with columns ``names`` and ``__w``), at
    ``at``'s keys when given, consolidated to their positive weights when ``live``."""
    rows = f"SELECT {column_list(names, '__t')}, __t.{W} FROM ({source}) AS __t"
    if at is not None:
        rows += " " + at_clause(at, "__t")
    return consolidate_sql(rows, names, positive_only=True) if live else rows


def at_clause(at: At, alias: str) -> str:
    """The clause that keeps, of rows named ``alias``, those at ``at``'s keys (appended to
    ``SELECT … FROM … AS alias``)."""
    if not at.nulls and len(at.columns) == 1:
        # IN: DuckDB prunes the scan of a sorted table by the keys' range.
        column = f"{alias}.{quote(at.columns[0])}"
        return f"WHERE {column} IN (SELECT * FROM ({at.keys}) AS __k)"
    names = [f"__k{i}" for i in range(len(at.columns))]
    equal = "IS NOT DISTINCT FROM" if at.nulls else "="
    match = " AND ".join(
        f"{alias}.{quote(c)} {equal} __k.{k}" for c, k in zip(at.columns, names, strict=True)
    )
    return f"SEMI JOIN ({at.keys}) AS __k({', '.join(names)}) ON {match}"
