"""Lossless casts: a batch column becomes the table's type only if no value can change."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ivm.views.batches.kinds import kind
from ivm.views.batches.problems import ARROW_ERRORS

# Kind changes that never alter a value once Arrow's safe cast has checked ranges,
# precision and scale. float -> int/decimal, decimal -> float, anything to or from
# strings, and timestamp -> date are refused: each can round or reinterpret values.
_WIDENINGS = frozenset(
    {("int", "float"), ("int", "decimal"), ("decimal", "int"), ("date", "timestamp")}
)


class Refused(Exception):
    """A cast that could change values; the argument says why, or is empty."""


def cast(values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """values cast to target, or Refused if some value could change."""
    source = values.type
    if source == target:
        return values
    if pa.types.is_null(source):
        return pa.chunked_array([pa.nulls(len(chunk), target) for chunk in values.chunks], target)
    if pa.types.is_dictionary(source):
        return cast(_arrow_cast(values, source.value_type), target)
    if pa.types.is_dictionary(target):
        return _arrow_cast(cast(values, target.value_type), target)
    if not castable(source, target):
        raise Refused(f"{kind(source) or source} values do not convert to {target}")
    if pa.types.is_integer(source) and pa.types.is_decimal(target):
        values = _arrow_cast(values, _decimal_for(source, target))
    result = _arrow_cast(values, target)
    if pa.types.is_floating(source) and pa.types.is_floating(target):
        _check_finite(values, result)
    return result


def castable(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether a safe cast from source to target keeps every value's meaning."""
    if pa.types.is_dictionary(source):
        source = source.value_type
    if pa.types.is_dictionary(target):
        target = target.value_type
    if source == target or pa.types.is_null(source):
        return True
    source_kind, target_kind = kind(source), kind(target)
    if source_kind is None or target_kind is None:
        return False
    if source_kind != target_kind:
        # A date read as midnight of which time zone? Only naive timestamps are clear.
        return (source_kind, target_kind) in _WIDENINGS and (
            target_kind != "timestamp" or target.tz is None
        )
    if source_kind == "timestamp":
        # Naive <-> zoned would have to guess a zone; zoned <-> zoned keeps the instant.
        return (source.tz is None) == (target.tz is None)
    if source_kind == "list":
        return castable(source.value_type, target.value_type)
    if source_kind == "map":
        return castable(source.key_type, target.key_type) and castable(
            source.item_type, target.item_type
        )
    if source_kind == "struct":
        fields = {field.name: field.type for field in source}
        targets = {field.name: field.type for field in target}
        return (
            len(fields) == source.num_fields
            and fields.keys() == targets.keys()
            and all(castable(fields[name], targets[name]) for name in targets)
        )
    return True


def _arrow_cast(values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """pyarrow's safe cast, its refusals turned into Refused."""
    try:
        return pc.cast(values, target, safe=True)
    except ARROW_ERRORS as exc:
        raise Refused(str(exc)) from None


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
        raise Refused(f"a value is out of the range of {result.type}")
