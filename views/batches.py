"""Batches: turn what a caller hands to ``ingest`` into a Z-set for one base table.

A Z-set batch holds the base table's columns plus the weight column ``__w``: row
``r`` with weight ``w`` means "``w`` copies of ``r`` were inserted" when ``w > 0``
and "``-w`` copies were deleted" when ``w < 0``. ``normalize_batch`` reads the change
kind from the batch's columns (API.md, "Batches"):

- only the table's columns: every row is inserted (weight +1);
- ``__w``: an integer weight per row;
- ``op`` with ``before``/``after`` structs (Debezium envelope): ``c``/``r`` insert
  ``after``, ``d`` deletes ``before``, ``u`` deletes ``before`` then inserts ``after``;
  every other envelope column (``source``, ``ts_ms``…) is ignored;
- ``_change_type`` (Delta Lake change data feed): ``insert``/``update_postimage``
  weigh +1, ``delete``/``update_preimage`` weigh -1; ``_commit_version`` and
  ``_commit_timestamp`` are ignored.

The result has one row per change (a ``u`` gives two, the delete first), in input
order, without rows of weight 0; it is not consolidated. Columns are matched by
name (exactly, else case-insensitively, as DuckDB identifiers are) and cast to the
table's Arrow types only when no value can change; see ``_castable``.

The work is columnar (pyarrow compute). Only a list of dicts is walked in Python,
to check its keys and build its columns, as ``pa.Table.from_pylist`` would.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ivm.errors import ConstraintError, SchemaError
from ivm.schema import WEIGHT, TableSchema

DEBEZIUM_OP = "op"
DEBEZIUM_BEFORE = "before"
DEBEZIUM_AFTER = "after"
DEBEZIUM_DELETES = ("u", "d")
DEBEZIUM_INSERTS = ("c", "r", "u")

DELTA_CHANGE_TYPE = "_change_type"
DELTA_INSERTS = ("insert", "update_postimage")
DELTA_DELETES = ("delete", "update_preimage")
DELTA_METADATA = frozenset({DELTA_CHANGE_TYPE, "_commit_version", "_commit_timestamp"})

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


def normalize_batch(batch: object, table: TableSchema, arrow_schema: pa.Schema) -> pa.Table:
    """Turn any accepted batch into a Z-set for `table`: exactly the table's columns, in
    arrow_schema's order and types, plus "__w" (int64), one row per input change, rows with
    weight 0 dropped; not consolidated.

    Raises SchemaError for a batch that does not fit the table (missing, unknown or
    lossy columns, bad weights or change codes) and ConstraintError for a NULL in a
    primary key or NOT NULL column.
    """
    context = f"table {table.name!r}"
    data = _to_arrow(batch, context)
    # Kernels such as take, filter and is_in lack view-type support: do the work on
    # plain types and cast to arrow_schema's exact types at the end.
    work_schema = pa.schema([pa.field(f.name, _without_views(f.type)) for f in arrow_schema])
    if data.num_columns == 0 and data.num_rows == 0:
        zset = _empty_zset(work_schema)
    else:
        reader = _READERS[_change_format(data.column_names, table)]
        zset = reader(data, table, work_schema, context)
    _check_required(zset, table)
    return zset.cast(_with_weight(arrow_schema))


# --- reading the batch into Arrow -------------------------------------------------------


def _to_arrow(batch: object, context: str) -> pa.Table:
    """The batch as a pa.Table, with unique column names."""
    if isinstance(batch, pa.Table):
        data = batch
    elif isinstance(batch, pa.RecordBatch):
        data = pa.Table.from_batches([batch])
    elif isinstance(batch, list | tuple):
        data = _from_dicts(batch, context)
    elif _is_pandas_frame(batch):
        try:
            data = pa.Table.from_pandas(batch, preserve_index=False)
        except _ARROW_ERRORS as exc:
            raise SchemaError(f"{context}: cannot convert the DataFrame: {exc}") from None
    else:
        raise SchemaError(
            f"{context}: cannot read a batch from {type(batch).__name__}; expected a pyarrow "
            "Table or RecordBatch, a pandas DataFrame or a list of dicts"
        )
    _check_unique(data.column_names, context)
    return data


def _is_pandas_frame(batch: object) -> bool:
    """Whether batch is a pandas DataFrame; pandas is only imported if the caller did."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(batch, pandas.DataFrame)


def _from_dicts(rows: Sequence[object], context: str) -> pa.Table:
    """A table from rows given as dicts that all have the same keys."""
    if not rows:
        return pa.table({})
    keys = _row_keys(rows, context)
    columns = {}
    for key in keys:
        try:
            columns[key] = pa.array([row[key] for row in rows])  # type: ignore[index]
        except (*_ARROW_ERRORS, OverflowError) as exc:
            raise SchemaError(f"{context}: cannot read column {key!r} of the rows: {exc}") from None
    return pa.table(columns)


def _row_keys(rows: Sequence[object], context: str) -> list[str]:
    """The keys of the first row, after checking that every row is a dict with those keys.

    pa.Table.from_pylist would silently drop keys missing from the first row and
    fill NULL for keys missing from later rows; here both are errors.
    """
    first = rows[0]
    if not isinstance(first, Mapping):
        raise SchemaError(f"{context}: row 0 of the batch is a {type(first).__name__}, not a dict")
    keys = first.keys()
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise SchemaError(
                f"{context}: row {i} of the batch is a {type(row).__name__}, not a dict"
            )
        if row.keys() != keys:
            missing = sorted(map(str, keys - row.keys()))
            extra = sorted(map(str, row.keys() - keys))
            raise SchemaError(
                f"{context}: row {i} of the batch has different keys from row 0 "
                f"(missing {missing}, extra {extra}); every row must have the same columns"
            )
    names = list(keys)
    for name in names:
        if not isinstance(name, str):
            raise SchemaError(f"{context}: batch column name {name!r} is not a string")
    return names


def _check_unique(names: Sequence[str], context: str) -> None:
    """Raise SchemaError if a column name appears twice."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SchemaError(f"{context}: batch has two columns named {name!r}")
        seen.add(name)


# --- change formats ---------------------------------------------------------------------


def _change_format(names: Sequence[str], table: TableSchema) -> str:
    """Which format the batch's columns follow: insert, weighted, debezium or delta.

    A control name that is also a column of the table is read as data.
    """
    table_names = {name.lower() for name in table.schema.names}
    present = {name for name in names if name.lower() not in table_names}
    formats = []
    if WEIGHT in names:
        formats.append("weighted")
    if DEBEZIUM_OP in present and present & {DEBEZIUM_BEFORE, DEBEZIUM_AFTER}:
        formats.append("debezium")
    if DELTA_CHANGE_TYPE in present:
        formats.append("delta")
    if len(formats) > 1:
        raise SchemaError(
            f"table {table.name!r}: batch mixes change formats ({', '.join(formats)}); "
            "use one of __w, Debezium op/before/after or Delta _change_type"
        )
    return formats[0] if formats else "insert"


def _read_inserts(data: pa.Table, table: TableSchema, schema: pa.Schema, context: str) -> pa.Table:
    """Every row inserted once."""
    columns = _conform(data, table, schema, frozenset(), context)
    return _zset(columns, pa.repeat(1, data.num_rows), schema)


def _read_weighted(data: pa.Table, table: TableSchema, schema: pa.Schema, context: str) -> pa.Table:
    """Rows with the weight given in ``__w``; weight 0 rows dropped."""
    weights = _weights(data.column(WEIGHT), context)
    columns = _conform(data, table, schema, frozenset({WEIGHT}), context)
    zset = _zset(columns, weights, schema)
    zero = pc.equal(weights, 0)
    return zset.filter(pc.invert(zero)) if pc.any(zero).as_py() else zset


def _weights(values: pa.ChunkedArray, context: str) -> pa.ChunkedArray:
    """The ``__w`` column as int64, rejecting non-integer and NULL weights."""
    if pa.types.is_dictionary(values.type):
        values = pc.cast(values, values.type.value_type)
    if not (pa.types.is_integer(values.type) or pa.types.is_null(values.type)):
        raise SchemaError(
            f"{context}: weight column {WEIGHT!r} has type {values.type}; weights are integers"
        )
    _fail_at_first(
        pc.is_null(values), lambda i: f"{context}: row {i} of the batch has a NULL weight"
    )
    try:
        return pc.cast(values, pa.int64(), safe=True)
    except _ARROW_ERRORS as exc:
        raise SchemaError(
            f"{context}: weight column {WEIGHT!r} does not fit int64: {exc}"
        ) from None


def _read_delta(data: pa.Table, table: TableSchema, schema: pa.Schema, context: str) -> pa.Table:
    """A Delta Lake change data feed: weights from ``_change_type``."""
    change = _strings(data.column(DELTA_CHANGE_TYPE), DELTA_CHANGE_TYPE, context)
    inserts = pc.is_in(change, value_set=pa.array(DELTA_INSERTS))
    deletes = pc.is_in(change, value_set=pa.array(DELTA_DELETES))
    _fail_at_first(
        pc.invert(pc.or_(inserts, deletes)),
        lambda i: (
            f"{context}: row {i} of the batch has unknown {DELTA_CHANGE_TYPE} "
            f"{_show(change[i])}; expected one of {', '.join(DELTA_INSERTS + DELTA_DELETES)}"
        ),
    )
    weights = pc.cast(pc.if_else(inserts, 1, -1), pa.int64())
    columns = _conform(data, table, schema, DELTA_METADATA, context)
    return _zset(columns, weights, schema)


def _read_debezium(data: pa.Table, table: TableSchema, schema: pa.Schema, context: str) -> pa.Table:
    """A Debezium envelope: deletes from ``before``, inserts from ``after``, by ``op``."""
    op = _strings(data.column(DEBEZIUM_OP), DEBEZIUM_OP, context)
    known = pc.is_in(op, value_set=pa.array(DEBEZIUM_DELETES + DEBEZIUM_INSERTS))
    _fail_at_first(
        pc.invert(known),
        lambda i: (
            f"{context}: Debezium row {i} has unknown op {_show(op[i])}; expected c, r, u or d"
        ),
    )
    sides = [
        _debezium_side(data, op, DEBEZIUM_BEFORE, DEBEZIUM_DELETES, table, schema, context),
        _debezium_side(data, op, DEBEZIUM_AFTER, DEBEZIUM_INSERTS, table, schema, context),
    ]
    parts = []
    order_keys = []
    for (columns, positions), weight, offset in zip(sides, (-1, 1), (0, 1), strict=True):
        if len(positions):
            parts.append(_zset(columns, pa.repeat(weight, len(positions)), schema))
            # Row i's delete sorts at 2i, its insert at 2i + 1: input order, delete first.
            order_keys.append(pc.add(pc.multiply(positions, 2), offset))
    if not parts:
        return _empty_zset(schema)
    if len(parts) == 1:
        return parts[0]
    order = pc.sort_indices(pa.concat_arrays(order_keys))
    return pa.concat_tables(parts).take(order)


def _debezium_side(
    data: pa.Table,
    op: pa.ChunkedArray,
    side: str,
    ops: tuple[str, ...],
    table: TableSchema,
    schema: pa.Schema,
    context: str,
) -> tuple[list[pa.ChunkedArray], pa.Array]:
    """The table rows in struct column `side` for the rows whose op is in `ops`,
    with those rows' positions in the batch."""
    positions = pc.indices_nonzero(pc.is_in(op, value_set=pa.array(ops)))
    structs = data.column(side) if side in data.column_names else None
    if structs is not None and not (
        pa.types.is_struct(structs.type) or pa.types.is_null(structs.type)
    ):
        raise SchemaError(
            f"{context}: Debezium column {side!r} has type {structs.type}; "
            "expected a struct of the table's columns"
        )

    def absent(i: int) -> str:
        row = positions[i].as_py()
        return f"{context}: Debezium row {row} (op {_show(op[row])}) has no {side!r} row"

    if structs is None or pa.types.is_null(structs.type):
        _fail_at_first(pa.repeat(True, len(positions)), absent)
        return _empty_columns(schema), positions
    rows = _take_structs(structs, positions)
    _fail_at_first(pc.is_null(rows), absent)
    flat = pa.Table.from_struct_array(rows)
    _check_unique(flat.column_names, f"{context}, Debezium {side!r} struct")
    columns = _conform(flat, table, schema, frozenset(), f"{context}, Debezium {side!r} struct")
    return columns, positions


def _take_structs(structs: pa.ChunkedArray, positions: pa.Array) -> pa.ChunkedArray:
    """The struct rows at `positions`, with view-typed fields made plain so take works."""
    plain = _without_views(structs.type)
    if plain != structs.type:
        structs = pc.cast(structs, plain)
    return structs.take(positions)


_READERS: dict[str, Callable[[pa.Table, TableSchema, pa.Schema, str], pa.Table]] = {
    "insert": _read_inserts,
    "weighted": _read_weighted,
    "debezium": _read_debezium,
    "delta": _read_delta,
}


# --- columns: matching and casting ------------------------------------------------------


class _Refused(Exception):
    """A cast that could change values; the argument says why, or is empty."""


def _conform(
    data: pa.Table,
    table: TableSchema,
    schema: pa.Schema,
    ignored: frozenset[str],
    context: str,
) -> list[pa.ChunkedArray]:
    """The batch's columns matching `schema`'s fields, in its order, cast to its types."""
    sources = _match_columns(data.schema, schema, ignored, table, context)
    columns = []
    for field, source in zip(schema, sources, strict=True):
        values = data.column(source)
        try:
            columns.append(_cast(values, field.type))
        except _Refused as exc:
            reason = f": {exc}" if str(exc) else ""
            raise SchemaError(
                f"{context}: column {field.name!r} has type {values.type} in the batch, which "
                f"does not cast losslessly to {_declared_type(table, field)} ({field.type})"
                f"{reason}"
            ) from None
    return columns


def _match_columns(
    batch: pa.Schema,
    schema: pa.Schema,
    ignored: frozenset[str],
    table: TableSchema,
    context: str,
) -> list[int]:
    """For each field of `schema`, the index of the batch column that holds it.

    A batch column matches a field of the same name, else one whose name differs
    only in case. Columns in `ignored` are skipped.
    """
    exact = {name: i for i, name in enumerate(schema.names)}
    folded = {name.lower(): i for i, name in enumerate(schema.names)}
    sources: list[list[int]] = [[] for _ in schema.names]
    unknown = []
    for index, name in enumerate(batch.names):
        if name in ignored:
            continue
        target = exact.get(name, folded.get(name.lower()))
        if target is None:
            unknown.append(f"{name!r} ({batch.field(index).type})")
        else:
            sources[target].append(index)
    if unknown:
        raise SchemaError(
            f"{context}: batch column {', '.join(unknown)} is not a column of the table; "
            f"its columns are {', '.join(schema.names)}"
        )
    missing = [
        f"{field.name!r} ({_declared_type(table, field)})"
        for field, found in zip(schema, sources, strict=True)
        if not found
    ]
    if missing:
        raise SchemaError(f"{context}: batch has no column {', '.join(missing)}")
    for field, found in zip(schema, sources, strict=True):
        if len(found) > 1:
            names = " and ".join(repr(batch.names[i]) for i in found)
            raise SchemaError(f"{context}: batch columns {names} both name column {field.name!r}")
    return [found[0] for found in sources]


def _kind(t: pa.DataType) -> str | None:
    """The family of an Arrow type: values convert losslessly within most families."""
    for kind, test in _KINDS:
        if test(t):
            return kind
    return None


def _is_string_like(t: pa.DataType) -> bool:
    """string, large_string or string_view."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_binary_like(t: pa.DataType) -> bool:
    """Any binary type."""
    return (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    )


def _is_list_like(t: pa.DataType) -> bool:
    """Any list type, views and fixed-size lists included."""
    return (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    )


_KINDS: tuple[tuple[str, Callable[[pa.DataType], bool]], ...] = (
    ("null", pa.types.is_null),
    ("bool", pa.types.is_boolean),
    ("int", pa.types.is_integer),
    ("float", pa.types.is_floating),
    ("decimal", pa.types.is_decimal),
    ("string", _is_string_like),
    ("binary", _is_binary_like),
    ("date", pa.types.is_date),
    ("timestamp", pa.types.is_timestamp),
    ("time", pa.types.is_time),
    ("duration", pa.types.is_duration),
    ("map", pa.types.is_map),
    ("list", _is_list_like),
    ("struct", pa.types.is_struct),
)

# Kind changes that never alter a value once Arrow's safe cast has checked ranges,
# precision and scale. float -> int/decimal, decimal -> float, anything to or from
# strings, and timestamp -> date are refused: each can round or reinterpret values.
_WIDENINGS = frozenset(
    {("int", "float"), ("int", "decimal"), ("decimal", "int"), ("date", "timestamp")}
)


def _castable(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether a safe cast from source to target keeps every value's meaning."""
    if pa.types.is_dictionary(source):
        source = source.value_type
    if pa.types.is_dictionary(target):
        target = target.value_type
    if source == target or pa.types.is_null(source):
        return True
    kind, target_kind = _kind(source), _kind(target)
    if kind is None or target_kind is None:
        return False
    if kind != target_kind:
        # A date read as midnight of which time zone? Only naive timestamps are clear.
        return (kind, target_kind) in _WIDENINGS and (
            target_kind != "timestamp" or target.tz is None
        )
    if kind == "timestamp":
        # Naive <-> zoned would have to guess a zone; zoned <-> zoned keeps the instant.
        return (source.tz is None) == (target.tz is None)
    if kind == "list":
        return _castable(source.value_type, target.value_type)
    if kind == "map":
        return _castable(source.key_type, target.key_type) and _castable(
            source.item_type, target.item_type
        )
    if kind == "struct":
        fields = {field.name: field.type for field in source}
        targets = {field.name: field.type for field in target}
        return (
            len(fields) == source.num_fields
            and fields.keys() == targets.keys()
            and all(_castable(fields[name], targets[name]) for name in targets)
        )
    return True


def _cast(values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """values cast to target, or _Refused if some value could change."""
    source = values.type
    if source == target:
        return values
    if pa.types.is_null(source):
        return pa.chunked_array([pa.nulls(len(chunk), target) for chunk in values.chunks], target)
    if pa.types.is_dictionary(source):
        return _cast(_arrow_cast(values, source.value_type), target)
    if pa.types.is_dictionary(target):
        return _arrow_cast(_cast(values, target.value_type), target)
    if not _castable(source, target):
        raise _Refused(f"{_kind(source) or source} values do not convert to {target}")
    if pa.types.is_integer(source) and pa.types.is_decimal(target):
        values = _arrow_cast(values, _decimal_for(source, target))
    result = _arrow_cast(values, target)
    if pa.types.is_floating(source) and pa.types.is_floating(target):
        _check_finite(values, result)
    return result


def _arrow_cast(values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """pyarrow's safe cast, its refusals turned into _Refused."""
    try:
        return pc.cast(values, target, safe=True)
    except _ARROW_ERRORS as exc:
        raise _Refused(str(exc)) from None


def _decimal_for(source: pa.DataType, target: pa.DataType) -> pa.DataType:
    """A decimal type that holds every value of integer type `source` at target's scale.

    Arrow casts int -> decimal only into a precision wide enough for the whole integer
    type; the second cast, decimal -> target, then checks each value's precision.
    """
    digits = len(
        str(
            2**source.bit_width - 1
            if pa.types.is_unsigned_integer(source)
            else 2 ** (source.bit_width - 1)
        )
    )
    precision = digits + max(target.scale, 0)
    if precision <= 38:
        return pa.decimal128(precision, target.scale)
    return pa.decimal256(precision, target.scale)


def _check_finite(source: pa.ChunkedArray, result: pa.ChunkedArray) -> None:
    """Refuse a narrowing float cast that turned a finite value into infinity.

    Rounding to the nearest float32 is accepted: it is what storing a double in a
    REAL column means, in DuckDB as elsewhere.
    """
    overflow = pc.and_(pc.is_inf(result), pc.invert(pc.is_inf(source)))
    if pc.any(overflow).as_py():
        raise _Refused(f"a value is out of the range of {result.type}")


def _without_views(t: pa.DataType) -> pa.DataType:
    """t with view types (string_view, binary_view, list views) replaced by plain ones."""
    if pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list_view(t) or pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_without_views(t.value_type)))
    if pa.types.is_large_list_view(t) or pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_without_views(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_without_views(t.value_type)), t.list_size)
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(_without_views(t.key_type)),
            t.item_field.with_type(_without_views(t.item_type)),
            t.keys_sorted,
        )
    if pa.types.is_struct(t):
        return pa.struct([field.with_type(_without_views(field.type)) for field in t])
    if pa.types.is_dictionary(t):
        return pa.dictionary(t.index_type, _without_views(t.value_type), t.ordered)
    return t


def _strings(values: pa.ChunkedArray, name: str, context: str) -> pa.ChunkedArray:
    """A control column (op, _change_type) as plain strings."""
    if pa.types.is_dictionary(values.type):
        values = pc.cast(values, values.type.value_type)
    if not (_kind(values.type) == "string" or pa.types.is_null(values.type)):
        raise SchemaError(f"{context}: column {name!r} has type {values.type}; expected strings")
    return pc.cast(values, pa.string())


def _declared_type(table: TableSchema, field: pa.Field) -> str:
    """The DuckDB type the table declares for field, for messages."""
    for column in table.schema.columns:
        if column.name == field.name:
            return column.type
    for column in table.schema.columns:
        if column.name.lower() == field.name.lower():
            return column.type
    return str(field.type)


# --- the result -------------------------------------------------------------------------


def _with_weight(schema: pa.Schema) -> pa.Schema:
    """schema plus the weight column."""
    return schema.append(pa.field(WEIGHT, pa.int64()))


def _zset(
    columns: list[pa.ChunkedArray], weights: pa.Array | pa.ChunkedArray, schema: pa.Schema
) -> pa.Table:
    """A Z-set table from columns matching schema and their weights."""
    if isinstance(weights, pa.Array):
        weights = pa.chunked_array([weights])
    return pa.Table.from_arrays([*columns, weights], schema=_with_weight(schema))


def _empty_columns(schema: pa.Schema) -> list[pa.ChunkedArray]:
    """No rows, one empty column per field of schema."""
    return [pa.chunked_array([], field.type) for field in schema]


def _empty_zset(schema: pa.Schema) -> pa.Table:
    """The Z-set with no rows."""
    return _with_weight(schema).empty_table()


def _check_required(zset: pa.Table, table: TableSchema) -> None:
    """Raise ConstraintError if a primary key or NOT NULL column holds NULL."""
    keys = {name.lower() for name in table.primary_key}
    required = {name.lower() for name in table.required}
    for name in zset.column_names[:-1]:
        nulls = zset.column(name).null_count
        if name.lower() in required and nulls:
            what = "part of the primary key" if name.lower() in keys else "NOT NULL"
            raise ConstraintError(
                f"table {table.name!r}: column {name!r} is {what}, but {nulls} row(s) "
                "of the batch hold NULL in it"
            )


# --- helpers ----------------------------------------------------------------------------


def _fail_at_first(mask: pa.ChunkedArray | pa.Array, message: Callable[[int], str]) -> None:
    """Raise SchemaError(message(i)) for the first row i where mask is true."""
    index = pc.index(pc.fill_null(mask, False), True).as_py()
    if index >= 0:
        raise SchemaError(message(index))


def _show(value: pa.Scalar) -> str:
    """A change code for a message: quoted, or NULL."""
    return "NULL" if value.as_py() is None else repr(value.as_py())
