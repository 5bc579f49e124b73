"""Checks a table's change against its current contents before anything is applied.

Two rules, each checked with one query that reads only the rows the change
touches (a semi-join of the trace with the change's keys):

* a delete may only remove copies that are there (no row's weight goes below 0);
* with a PRIMARY KEY, each key holds at most one live row afterwards. A batch
  may insert a key it also deletes (an update); ``upsert`` mode turns an insert
  of an existing key into "delete the old row, insert the new one".
"""

from __future__ import annotations

import duckdb

from ivm.errors import ConstraintError
from ivm.plan.sql import W, column_list, null_safe_match
from ivm.schema import TableSchema, quote
from ivm.storage.results import fetch_first


def upsert_sql(table: TableSchema, change: str, trace: str) -> str:
    """``change`` where each inserted key first retracts the key's live row.

    Deletes the batch itself makes of such keys are dropped: the insert replaces
    whatever row holds the key.
    """
    key = column_list(table.primary_key)
    cols = column_list(table.schema.names)
    inserted = f"SELECT DISTINCT {key} FROM ({change}) AS i WHERE {W} > 0"
    kept = (
        f"SELECT * FROM ({change}) AS c WHERE {W} > 0 OR ({column_list(table.primary_key, 'c')}) "
        f"NOT IN ({inserted})"
    )
    replaced = (
        f"SELECT {column_list(table.schema.names, 't')}, -SUM(t.{W})::BIGINT AS {W} "
        f"FROM {trace} AS t SEMI JOIN ({inserted}) AS k ON "
        + " AND ".join(f"t.{quote(k)} = k.{quote(k)}" for k in table.primary_key)
        + f" GROUP BY ALL HAVING SUM(t.{W}) > 0"
    )
    return (
        f"SELECT {cols}, SUM({W})::BIGINT AS {W} FROM ({kept} UNION ALL {replaced}) AS u "
        f"GROUP BY {cols} HAVING SUM({W}) <> 0"
    )


def check_change(
    con: duckdb.DuckDBPyConnection, table: TableSchema, change: str, trace: str
) -> None:
    """Raise ConstraintError if applying the consolidated ``change`` to ``trace`` breaks a rule.

    One query reads the trace rows the change touches and returns the first row
    driven below zero and the first key left with two live rows, if any.
    """
    names = table.schema.names
    cols = column_list(names)
    key = table.primary_key
    if key:
        match = " AND ".join(f"t.{quote(k)} = c.{quote(k)}" for k in key)
    else:
        match = null_safe_match(names, "t", "c")
    touched = (
        f"SELECT {column_list(names, 't')}, t.{W} FROM {trace} AS t "
        f"SEMI JOIN ({change}) AS c ON {match} UNION ALL SELECT {cols}, {W} FROM ({change}) AS d"
    )
    after = f"SELECT {cols}, SUM({W}) AS {W} FROM ({touched}) AS x GROUP BY {cols}"
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
