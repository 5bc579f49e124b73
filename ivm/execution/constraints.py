"""A table's change made to apply to its stored rows, and checked, before anything is applied.

A delete takes out stored rows, and what it retracts from every view is what
those rows produced: so each row a batch deletes is *resolved* to the stored
rows it matches (DuckDB's ``=``, NULL matching NULL), their values byte for
byte. The batch's own values may differ from the stored ones where DuckDB calls
them equal (``-0.0`` and ``0.0``, NaNs of another sign or payload, an interval
spelled in other units: ``ivm.execution.exact``), and views evaluate those
differently (``CAST(d AS VARCHAR)``, ``1/d``). Where several stored values match
one deleted row (a table without a key may hold ``0.0`` and ``-0.0``), the one
identical to the deleted value goes first (``resolved_sql``).

Two rules are then checked:

* a delete may only remove copies that are there (no row's weight goes below 0);
* with a PRIMARY KEY, each key holds at most one live row afterwards. A batch
  may insert a key it also deletes (an update); ``upsert`` mode turns an insert
  of an existing key into "delete the old row, insert the new one".

``resolve_change`` does both with one read of the trace (a semi-join with the
change's keys, or rows without a key), then works on that small set of rows.
An embedded session skips it when its row index vouches that every delete is
byte-identical to a live row and the rules hold (``ivm.execution.row_index``).
"""

from __future__ import annotations

import duckdb

from ivm import faults
from ivm.errors import ConstraintError
from ivm.execution.exact import consolidate_exact_sql, exact_hash_sql, exact_terms
from ivm.plan.sql import W, column_list, null_safe_match
from ivm.schema import TableSchema, quote
from ivm.storage.results import fetch_first


def upsert_sql(table: TableSchema, change: str, trace: str) -> str:
    """``change`` where each inserted key first retracts the key's live row (as stored).

    Deletes the batch itself makes of such keys are dropped: the insert replaces
    whatever row holds the key. The result is consolidated with values DuckDB calls
    equal kept apart, so an upsert of ``-0.0`` over ``0.0`` replaces it.
    """
    key = column_list(table.primary_key)
    inserted = f"SELECT DISTINCT {key} FROM ({change}) AS i WHERE {W} > 0"
    kept = (
        f"SELECT * FROM ({change}) AS c WHERE {W} > 0 OR ({column_list(table.primary_key, 'c')}) "
        f"NOT IN ({inserted})"
    )
    replaced = (
        f"SELECT {column_list(table.schema.names, 't')}, -SUM(t.{W})::BIGINT AS {W} "
        f"FROM {trace} AS t SEMI JOIN ({inserted}) AS k ON "
        + " AND ".join(f"t.{quote(k)} = k.{quote(k)}" for k in table.primary_key)
        + f" GROUP BY {', '.join(exact_terms(table.schema.columns, 't'))} HAVING SUM(t.{W}) > 0"
    )
    return consolidate_exact_sql(f"{kept} UNION ALL {replaced}", table.schema)


def touched_sql(table: TableSchema, change: str, trace: str) -> str:
    """The live stored rows ``change`` may touch, each distinct stored value once with its
    copies: with a key, the rows of the change's keys; without, the rows equal to one of
    its rows."""
    names = table.schema.names
    if table.primary_key:
        match = " AND ".join(f"t.{quote(k)} = c.{quote(k)}" for k in table.primary_key)
    else:
        match = null_safe_match(names, "t", "c")
    return (
        f"SELECT {column_list(names, 't')}, SUM(t.{W})::BIGINT AS {W} FROM {trace} AS t "
        f"SEMI JOIN ({change}) AS c ON {match} "
        f"GROUP BY {', '.join(exact_terms(table.schema.columns, 't'))} HAVING SUM(t.{W}) > 0"
    )


N, FP, TOOK, BEFORE = "__ivm_n", "__ivm_fp", "__ivm_took", "__ivm_before"
"""Columns of the resolution's own (``__ivm_`` names are reserved: no user column)."""


def resolved_sql(table: TableSchema, change: str, touched: str) -> str:
    """``change`` (consolidated exactly) with its deletes resolved to the stored rows of
    ``touched`` (``touched_sql``) and the rows the change itself inserts, in two passes:

    1. each deleted value takes the copies identical to it;
    2. the copies still to delete in each class of equal rows take the class's other
       copies, in the order of their exact hashes (a choice among values DuckDB calls
       equal, which only a table without a key, or a batch, can hold at once).

    Copies nothing covers stay as the batch gave them, for the check to refuse.
    """
    names = table.schema.names
    cols, a_cols, b_cols = column_list(names), column_list(names, "a"), column_list(names, "b")
    fingerprint = exact_hash_sql(table.schema.columns)
    same = null_safe_match(names, "a", "b")
    left = f"COALESCE(e.{TOOK}, 0)"  # copies the first pass took
    ctes = {  # wanted: deleted values; stored: copies there (stored or inserted)
        "__ivm_wanted": f"SELECT {cols}, -{W} AS {N}, {fingerprint} AS {FP} "
                        f"FROM ({change}) AS c WHERE {W} < 0",
        "__ivm_stored": f"SELECT *, {fingerprint} AS {FP} FROM (SELECT {cols}, SUM({N}) AS {N} "
                        f"FROM (SELECT {cols}, {W} AS {N} FROM ({touched}) AS t UNION ALL "
                        f"SELECT {cols}, {W} FROM ({change}) AS c WHERE {W} > 0) AS a "
                        f"GROUP BY {', '.join(exact_terms(table.schema.columns))}) AS b",
        "__ivm_exact": f"SELECT a.{FP}, LEAST(a.{N}, b.{N}) AS {TOOK} FROM __ivm_wanted AS a "
                       f"JOIN __ivm_stored AS b ON a.{FP} = b.{FP} AND {same}",
        "__ivm_rest": f"SELECT {a_cols}, SUM(a.{N} - {left}) AS {N} FROM __ivm_wanted AS a "
                      f"LEFT JOIN __ivm_exact AS e ON a.{FP} = e.{FP} GROUP BY {a_cols} "
                      f"HAVING SUM(a.{N} - {left}) > 0",
        "__ivm_spare": f"SELECT {a_cols}, a.{N} - {left} AS {N}, a.{FP} FROM __ivm_stored AS a "
                       f"LEFT JOIN __ivm_exact AS e ON a.{FP} = e.{FP} WHERE a.{N} > {left}",
        "__ivm_ranked": f"SELECT {a_cols}, a.{N} AS __ivm_spare, b.{N}, "
                        f"COALESCE(SUM(a.{N}) OVER (PARTITION BY {b_cols} ORDER BY a.{FP} "
                        f"ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS {BEFORE} "
                        f"FROM __ivm_spare AS a JOIN __ivm_rest AS b ON {same}",
    }
    first = (
        f"SELECT {b_cols}, -e.{TOOK} AS {W} "
        f"FROM __ivm_stored AS b JOIN __ivm_exact AS e ON b.{FP} = e.{FP}"
    )
    second = (
        f"SELECT {cols}, -LEAST(__ivm_spare, {N} - {BEFORE}) AS {W} FROM __ivm_ranked "
        f"WHERE {BEFORE} < {N}"
    )
    short = (
        f"SELECT {b_cols}, -(ANY_VALUE(b.{N}) - COALESCE(SUM(a.{N}), 0)) AS {W} "
        f"FROM __ivm_rest AS b LEFT JOIN __ivm_spare AS a ON {same} GROUP BY {b_cols} "
        f"HAVING ANY_VALUE(b.{N}) > COALESCE(SUM(a.{N}), 0)"
    )
    inserts = f"SELECT {cols}, {W} FROM ({change}) AS c WHERE {W} > 0"
    with_ = ", ".join(f"{name} AS ({sql})" for name, sql in ctes.items())
    return f"WITH {with_} " + consolidate_exact_sql(
        f"{inserts} UNION ALL {first} UNION ALL {second} UNION ALL {short}", table.schema
    )


def resolve_change(
    con: duckdb.DuckDBPyConnection,
    table: TableSchema,
    change: str,
    trace: str,
    into: str,
    scratch: str,
    check: bool = True,
) -> str:
    """Resolve the consolidated ``change``'s deletes to the rows of ``trace`` (``table``'s
    trace) into temp table ``into``, and (``check``) raise ConstraintError if it breaks a
    rule; returns SQL reading it. ``scratch`` names a temp table of the rows touched."""
    run = lambda sql: con.execute(sql).fetchall()  # noqa: E731
    run(f"CREATE OR REPLACE TEMP TABLE {scratch} AS {touched_sql(table, change, trace)}")
    touched = f"SELECT * FROM {scratch}"
    run(f"CREATE OR REPLACE TEMP TABLE {into} AS {resolved_sql(table, change, touched)}")
    if check:
        check_rules(con, table, f"SELECT * FROM {into}", touched)
    return f"SELECT {column_list(table.schema.names)}, {W} FROM {into}"


def check_rules(
    con: duckdb.DuckDBPyConnection, table: TableSchema, change: str, touched: str
) -> None:
    """Raise ConstraintError if applying ``change`` to the stored rows breaks a rule.

    ``touched`` holds every live stored row the change may touch (``touched_sql``).
    One query returns the first class of equal rows driven below zero and the first
    key left with two live rows, if any.
    """
    faults.reached("checks.rules")
    names = table.schema.names
    cols = column_list(names)
    key = table.primary_key
    rows = (
        f"SELECT {cols}, {W} FROM ({touched}) AS t "
        f"UNION ALL SELECT {cols}, {W} FROM ({change}) AS d"
    )
    after = f"SELECT {cols}, SUM({W}) AS {W} FROM ({rows}) AS x GROUP BY {cols}"
    packed = ", ".join(f"{quote(n)} := {quote(n)}" for n in names)
    missing = f"(SELECT struct_pack({packed})::VARCHAR FROM after WHERE {W} < 0 LIMIT 1)"
    duplicate = "NULL"
    if key:
        keys = column_list(key)
        duplicate = (
            f"(SELECT struct_pack({', '.join(f'{quote(k)} := {quote(k)}' for k in key)})::VARCHAR "
            f"FROM after WHERE {W} > 0 "
            f"GROUP BY {keys} HAVING SUM({W}) > 1 LIMIT 1)"
        )
    row = fetch_first(con, f"WITH after AS ({after}) SELECT {missing}, {duplicate}")
    if row is None:
        return
    if row[0] is not None:
        raise ConstraintError(
            f"table {table.name!r}: the batch deletes a row that is not there: {row[0]}"
        )
    if row[1] is not None:
        raise ConstraintError(
            f"table {table.name!r}: duplicate primary key {row[1]}: after this batch the key "
            "would hold more than one row (a batch may insert a key only once, and only if the "
            "key is free or the batch also deletes its row; mode='upsert' replaces rows)"
        )
