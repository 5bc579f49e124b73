"""CDC as it really arrives: what a batch means before it becomes a Z-set of whole rows.

``views.batches`` reads a batch whose every delete carries the whole row. Real
change streams do not always:

* **Key-only deletes.** Debezium over PostgreSQL with the default ``REPLICA
  IDENTITY`` sends a delete's ``before`` with only the primary key set (the other
  fields null or absent), and an update with no ``before`` at all. In a table with a
  primary key such a delete removes whatever row holds the key at that point of
  the batch: the last row the batch inserted for it before, else the stored row.
* **Truncate.** A Debezium ``op = 't'`` event empties the table: the changes before
  the last truncate are superseded, every stored row is deleted, and the changes
  after it apply to the empty table.
* **Several versions of one key in an upsert.** ``ingest(..., mode="upsert")`` keeps
  the last insert of each key: the last in batch order, or the one with the greatest
  value of the ``sequence=`` column (a log position, a timestamp), which is then
  dropped from the batch.

``arrived`` turns such a batch into a weighted batch of whole rows (the table's
columns and ``__w``) that ``views.batches`` then reads like any other; a batch
with none of these is passed on untouched. The work is columnar: Arrow compute and
one DuckDB query over the batch and the stored rows of the keys it names.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ivm.errors import ConstraintError, SchemaError
from ivm.plan.sql import W, column_list
from ivm.schema import WEIGHT, TableSchema, quote
from ivm.views.batches import normalize_batch
from ivm.views.batches.casts import Refused, cast
from ivm.views.batches.formats import (
    DEBEZIUM_AFTER,
    DEBEZIUM_BEFORE,
    DEBEZIUM_OP,
    change_format,
    control_strings,
)
from ivm.views.batches.reading import to_arrow

POSITION = "__ivm_pos"
"""Each change's place in the batch (row i's delete at 2i, its insert at 2i + 1)."""
TRUNCATE = "t"
"""Debezium's op of a truncate event."""

Stored = Callable[[], str]
"""Gives a relation (SQL) of the table's live rows, one row per copy; called only if needed."""


def arrived(
    con: duckdb.DuckDBPyConnection,
    batch: object,
    table: TableSchema,
    arrow: pa.Schema,
    stored: Stored,
    upsert: bool,
    sequence: str | None,
) -> object:
    """The batch as ``views.batches`` can read it (see the module docstring): ``batch``
    itself when nothing needs resolving, else a weighted Arrow table of whole rows.
    ``stored`` gives the table's live rows (read through ``con``)."""
    context = f"table {table.name!r}"
    if sequence is not None and not (upsert and table.primary_key):
        raise SchemaError(
            f"{context}: sequence= orders the versions of a key in an upsert: it needs "
            "mode='upsert' and a table with a PRIMARY KEY"
        )
    if _is_spark(batch):
        if not (upsert and table.primary_key):
            return batch
        from ivm.views.spark.upserts import latest_versions  # pyspark is loaded: a DataFrame

        return latest_versions(batch, table, sequence, context)
    data = to_arrow(batch, context)
    order = None
    if sequence is not None:
        data, order = _sequence(data, sequence, context)
        if change_format(data.column_names, table) != "insert":
            raise SchemaError(
                f"{context}: sequence= applies to a batch of plain rows (one version per row)"
            )
    if data.num_rows and change_format(data.column_names, table) == "debezium":
        data = _debezium(con, data, table, arrow, stored, context)
    if upsert and table.primary_key:
        data = _latest_versions(con, data, table, arrow, order)
    return data


def _is_spark(batch: object) -> bool:
    """Whether the batch is a Spark DataFrame (resolved on Spark, not here)."""
    return type(batch).__module__.split(".")[0] == "pyspark"


def _sequence(data: pa.Table, sequence: str, context: str) -> tuple[pa.Table, pa.ChunkedArray]:
    """The batch without its ``sequence`` column, and that column."""
    if sequence not in data.column_names:
        raise SchemaError(
            f"{context}: sequence={sequence!r} names no column of the batch; its columns are "
            f"{', '.join(data.column_names)}"
        )
    return data.drop_columns([sequence]), data.column(sequence)


# -- Debezium: truncates and key-only deletes ------------------------------------------------


def _debezium(
    con: duckdb.DuckDBPyConnection, data: pa.Table, table: TableSchema, arrow: pa.Schema,
    stored: Stored, context: str,
) -> pa.Table:
    """A Debezium batch with truncates and key-only deletes resolved to whole rows (the
    batch itself when it has neither)."""
    op = _flat(control_strings(data.column(DEBEZIUM_OP), DEBEZIUM_OP, context))
    truncates = pc.indices_nonzero(pc.equal(op, TRUNCATE))
    truncated = len(truncates) > 0
    if truncated:
        start = truncates[-1].as_py() + 1
        data, op = data.slice(start), op.slice(start)
    by_key_deletes = _flat(_key_only(data, op, DEBEZIUM_BEFORE, "d", table))
    by_key_updates = _flat(_key_only(data, op, DEBEZIUM_BEFORE, "u", table))
    if not truncated and not (pc.any(by_key_deletes).as_py() or pc.any(by_key_updates).as_py()):
        return data
    rows = pc.indices_nonzero(pc.invert(by_key_deletes))  # the rest reads as it is
    ops = pc.if_else(by_key_updates, "c", op).take(rows)  # its insert; its delete is by key
    whole = data.drop_columns([DEBEZIUM_OP]).take(rows).append_column(DEBEZIUM_OP, ops)
    deletes = pc.is_in(ops, value_set=pa.array(["u", "d"]))
    if DEBEZIUM_BEFORE in whole.column_names and not pc.any(deletes).as_py():
        # No whole delete is left: a before struct of keys alone need not fit the table.
        index = whole.column_names.index(DEBEZIUM_BEFORE)
        whole = whole.set_column(index, DEBEZIUM_BEFORE, pa.nulls(whole.num_rows))
    zset = normalize_batch(whole, table, arrow)
    inserts = pc.is_in(ops, value_set=pa.array(["c", "r", "u"]))
    slots = pa.concat_arrays([  # as views.batches.debezium orders them: 2i, then 2i + 1
        pc.multiply(rows.filter(deletes), 2), pc.add(pc.multiply(rows.filter(inserts), 2), 1)
    ])
    order = slots.take(pc.sort_indices(slots))
    zset = zset.append_column(POSITION, pc.cast(order, pa.int64()))
    keys = _keys(data, by_key_deletes, by_key_updates, table, arrow, context)
    return _resolve(con, zset, keys, table, stored, truncated, context)


def _flat(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array of the values (masks and indices mix only with arrays)."""
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _key_only(
    data: pa.Table, op: pa.Array, side: str, code: str, table: TableSchema
) -> pa.Array | pa.ChunkedArray:
    """Which rows of op ``code`` carry no whole row in ``side``: for a delete, a struct
    whose every non-key field is null or absent; for an update, no struct at all. Only
    tables with a primary key and other columns have such rows."""
    ours = pc.fill_null(pc.equal(op, code), False)
    keyed = {k.lower() for k in table.primary_key}
    others = [n for n in table.schema.names if n.lower() not in keyed]
    if not keyed or not others:
        return pc.and_(ours, pa.scalar(False))
    structs = data.column(side) if side in data.column_names else None
    if structs is None or pa.types.is_null(structs.type):
        return ours if code == "u" else pc.and_(ours, pa.scalar(False))
    if code == "u":
        return pc.and_(ours, pc.is_null(structs))
    fields = {structs.type.field(i).name.lower(): i for i in range(structs.type.num_fields)}
    empty = pc.invert(pc.is_null(structs))
    for name in others:
        if name.lower() in fields:
            empty = pc.and_(empty, pc.is_null(pc.struct_field(structs, [fields[name.lower()]])))
    return pc.and_(ours, pc.fill_null(empty, False))


def _keys(
    data: pa.Table, deletes: pa.ChunkedArray, updates: pa.ChunkedArray, table: TableSchema,
    arrow: pa.Schema, context: str,
) -> pa.Table:
    """The keys the key-only changes delete (from ``before``, or an update's ``after``),
    cast to the table's types, with each change's position (its delete's: 2i)."""
    parts = []
    for mask, side in ((deletes, DEBEZIUM_BEFORE), (updates, DEBEZIUM_AFTER)):
        rows = pc.indices_nonzero(mask)
        if not len(rows):
            continue
        structs = data.column(side).take(rows)
        flat = pa.Table.from_struct_array(structs)
        folded = {n.lower(): n for n in flat.column_names}
        columns = {}
        for key in table.primary_key:
            source = folded.get(key.lower())
            if source is None:
                raise SchemaError(
                    f"{context}: a Debezium {side!r} row carries no {key!r}, part of the "
                    "primary key: a delete needs at least the key"
                )
            target = arrow.field(key).type
            try:
                columns[key] = cast(flat.column(source), target)
            except Refused as error:
                raise SchemaError(
                    f"{context}: Debezium {side!r} key column {key!r} has type "
                    f"{flat.column(source).type}, which does not cast to {target}: {error}"
                ) from None
        columns[POSITION] = pc.cast(pc.multiply(rows, 2), pa.int64())
        parts.append(pa.table(columns))
    if not parts:
        schema = [pa.field(k, arrow.field(k).type) for k in table.primary_key]
        return pa.schema([*schema, pa.field(POSITION, pa.int64())]).empty_table()
    return pa.concat_tables(parts)


def _resolve(
    con: duckdb.DuckDBPyConnection, zset: pa.Table, keys: pa.Table, table: TableSchema,
    stored: Stored, truncated: bool, context: str,
) -> pa.Table:
    """Whole rows: the batch's own changes, each key-only delete as the row its key held
    just before it (the batch's last insert of the key before it, else the stored row),
    and, after a truncate, every stored row deleted."""
    names = table.schema.names
    key = table.primary_key
    on = " AND ".join(f"k.{quote(c)} = i.{quote(c)}" for c in key)
    on_stored = " AND ".join(f"k.{quote(c)} = s.{quote(c)}" for c in key)
    picked = ", ".join(
        f"k.{quote(n)}" if n in key else
        f"CASE WHEN i.{POSITION} IS NULL THEN s.{quote(n)} ELSE i.{quote(n)} END AS {quote(n)}"
        for n in names
    )
    live_rows = (  # after a truncate, no stored row is live
        f"SELECT {column_list(names, 's')} FROM __ivm_zset AS s WHERE false" if truncated
        else f"SELECT s.* FROM ({stored()}) AS s SEMI JOIN __ivm_keys AS k ON {on_stored}"
    )
    found = f"i.{POSITION} IS NOT NULL OR s.{quote(key[0])} IS NOT NULL"
    resolved = (
        f"SELECT {picked}, -1::BIGINT AS {W}, {found} AS __ivm_found "
        f"FROM __ivm_keys AS k ASOF LEFT JOIN (SELECT * FROM __ivm_zset WHERE {W} > 0) AS i "
        f"ON {on} AND k.{POSITION} > i.{POSITION} "
        f"LEFT JOIN ({live_rows}) AS s ON {on_stored}"
    )
    con.register("__ivm_zset", zset)
    con.register("__ivm_keys", keys)
    try:
        deletes = con.sql(resolved).to_arrow_table()
        _check_found(deletes, key, context)
        parts = [
            zset.select([*names, WEIGHT]),
            deletes.select([*names, WEIGHT]).cast(zset.select([*names, WEIGHT]).schema),
        ]
        if truncated:
            emptied = f"SELECT {column_list(names)}, -COUNT(*)::BIGINT AS {W} FROM ({stored()}) " \
                      f"AS s GROUP BY ALL"
            parts.append(con.sql(emptied).to_arrow_table().cast(parts[0].schema))
    finally:
        con.unregister("__ivm_zset")
        con.unregister("__ivm_keys")
    return pa.concat_tables(parts)


def _check_found(deletes: pa.Table, key: tuple[str, ...], context: str) -> None:
    """ConstraintError naming the first key a key-only delete finds no row for."""
    missing = pc.indices_nonzero(pc.invert(deletes.column("__ivm_found")))
    if len(missing):
        row = deletes.take(missing[:1]).select(list(key)).to_pylist()[0]
        raise ConstraintError(
            f"{context}: the batch deletes key {row} (a delete carrying only the key), but "
            "no row holds that key"
        )


# -- upserts: the last version of each key ---------------------------------------------------


def _latest_versions(
    con: duckdb.DuckDBPyConnection, data: pa.Table, table: TableSchema, arrow: pa.Schema,
    order: pa.ChunkedArray | None,
) -> pa.Table:
    """An upsert's batch with only the last insert of each key (by ``order``, then batch
    order); deletes stay. The batch itself when no key is inserted twice."""
    zset = normalize_batch(data, table, arrow)
    key = column_list(table.primary_key)
    work = zset.append_column(POSITION, pa.array(np.arange(zset.num_rows, dtype=np.int64)))
    if order is not None:
        work = work.append_column("__ivm_seq", order)
    con.register("__ivm_upsert", work)
    try:
        repeated = con.sql(
            f"SELECT 1 FROM __ivm_upsert WHERE {W} > 0 GROUP BY {key} HAVING COUNT(*) > 1 "
            "LIMIT 1"
        ).fetchall()
        if not repeated:
            return zset
        by = f"__ivm_seq DESC NULLS LAST, {POSITION} DESC" if order is not None else \
            f"{POSITION} DESC"
        kept = con.sql(
            f"SELECT {column_list(table.schema.names)}, {W} FROM __ivm_upsert WHERE {W} < 0 "
            f"UNION ALL SELECT {column_list(table.schema.names)}, {W} FROM __ivm_upsert "
            f"WHERE {W} > 0 QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY {by}) = 1"
        ).to_arrow_table()
    finally:
        con.unregister("__ivm_upsert")
    return kept.cast(zset.schema)
