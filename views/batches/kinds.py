"""Families of Arrow types ("kinds"), and view types made plain.

Values convert losslessly within most kinds (int8 -> int64, string -> large_string);
``casts`` decides which conversions between kinds are safe.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa


def kind(t: pa.DataType) -> str | None:
    """The family of an Arrow type: values convert losslessly within most families."""
    for name, test in _KINDS:
        if test(t):
            return name
    return None


def without_views(t: pa.DataType) -> pa.DataType:
    """t with view types (string_view, binary_view, list views) replaced by plain ones."""
    if pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list_view(t) or pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(without_views(t.value_type)))
    if pa.types.is_large_list_view(t) or pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(without_views(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(without_views(t.value_type)), t.list_size)
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(without_views(t.key_type)),
            t.item_field.with_type(without_views(t.item_type)),
            t.keys_sorted,
        )
    if pa.types.is_struct(t):
        return pa.struct([field.with_type(without_views(field.type)) for field in t])
    if pa.types.is_dictionary(t):
        return pa.dictionary(t.index_type, without_views(t.value_type), t.ordered)
    return t


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
