"""Which rows of a lookup are exactly at the keys looked up, compared in Arrow.

An arrangement finds rows by the hash of their key; a hash may be shared by another key
(a collision), so the rows found are compared with the keys by value, in Arrow, where
Arrow's equality is DuckDB's (``rows_at_keys``); otherwise the statement that reads them
compares them (``ivm.operators.reads``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ivm.storage.arrangement import Batch, with_weights

PROBE_HASH = "__ivm_ph"
"""The column of a probe's key hash."""


def rows_at_keys(
    found: Batch, probes: pa.Table, columns: Sequence[str], nulls: bool
) -> pa.Table | None:
    """Of ``found`` (rows looked up by the hashes of ``probes``' keys, with their key
    hashes), the rows whose key equals a probe's, with their weights; None when Arrow
    cannot decide equality as DuckDB does (a type outside ``EXACT_TYPES``) or two probes
    share a hash (see ``key_matches``)."""
    matched = key_matches(found, probes, probes.column(PROBE_HASH).to_numpy(), columns, nulls)
    if matched is None:
        return None
    kept, _ = matched
    if len(kept) == len(found):
        return with_weights(found.rows, found.weights)
    return with_weights(found.rows.take(kept), found.weights[kept])


def key_matches(
    found: Batch, keys: pa.Table, hashes: np.ndarray, columns: Sequence[str], nulls: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """Which rows of ``found`` (looked up by ``hashes``, the hashes of ``keys``' rows)
    are at a row of ``keys``: their positions in ``found`` and, for each, the row of
    ``keys`` it is at. None when Arrow cannot decide equality as DuckDB does (a type
    outside ``EXACT_TYPES``) or two keys share a hash. Each row is compared with the one
    key of its hash, column by column: ``nulls``: NULL equals NULL (a group key), else a
    NULL key matches nothing."""
    if not all(_exactly_comparable(keys.schema.field(c).type) for c in columns):
        return None
    order = np.argsort(hashes, kind="stable")
    ordered = hashes[order]
    if len(ordered) > 1 and bool(np.any(ordered[1:] == ordered[:-1])):
        return None
    if len(found) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    key_of_row = order[np.searchsorted(ordered, found.keys)]
    keep = None
    for column in columns:
        mine = found.rows.column(column)
        theirs = keys.column(column).take(key_of_row)
        same = pc.fill_null(pc.equal(mine, theirs), False)
        if pa.types.is_floating(mine.type):  # DuckDB: NaN equals NaN
            same = pc.or_(same, pc.and_(pc.is_nan(mine), pc.is_nan(theirs)))
            same = pc.fill_null(same, False)
        if nulls:
            same = pc.or_(same, pc.and_(pc.is_null(mine), pc.is_null(theirs)))
        keep = same if keep is None else pc.and_(keep, same)
    if keep is None:  # no key columns: every row is at the one key
        return np.arange(len(found)), key_of_row
    kept = np.flatnonzero(keep.to_numpy(zero_copy_only=False))
    return kept, key_of_row[kept]


def _exactly_comparable(type_: pa.DataType) -> bool:
    """Whether Arrow's equality of two values of ``type_`` is DuckDB's (integers,
    decimals, strings, bytes, booleans, dates, times, timestamps; floats with NaN
    handled by the caller). Not: intervals (DuckDB equates 30 days and 1 month), lists,
    structs, maps, unions, extension types (HUGEINT, UUID…), dictionaries (ENUM)."""
    t = pa.types
    return bool(
        t.is_integer(type_) or t.is_decimal(type_) or t.is_string(type_)
        or t.is_large_string(type_) or t.is_binary(type_) or t.is_large_binary(type_)
        or t.is_boolean(type_) or t.is_date(type_) or t.is_time(type_)
        or t.is_timestamp(type_) or t.is_floating(type_)
    ) and not isinstance(type_, pa.ExtensionType)
