"""functions.wide_integers: 128-bit sums added in numpy are DuckDB's sums, refused where
DuckDB refuses them, and read and written as DuckDB's Arrow arrays."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ivm.functions.wide_integers import Wide, is_wide

INT128 = st.integers(-(2**127) + 1, 2**127 - 1)  # DuckDB cannot spell -2¹²⁷


def _duckdb(values: list[int], type_: str) -> pa.Table:
    """``values`` as DuckDB hands them to Arrow (exact types), and each as DOUBLE."""
    con = duckdb.connect()
    con.execute("SET arrow_lossless_conversion = true")
    rows = ", ".join(f"({v}::{type_})" for v in values)
    query = f"SELECT v, CAST(v AS DOUBLE) AS d FROM (VALUES {rows}) AS t(v)"
    return con.sql(query).to_arrow_table()


def _ints(wide: Wide) -> list[int]:
    return [(int(h) << 64) + int(lo) for h, lo in zip(wide.high, wide.low, strict=True)]


@settings(max_examples=30, deadline=None)
@given(st.lists(INT128, min_size=1, max_size=40), st.lists(INT128, min_size=1, max_size=40))
def test_sums_are_exact_and_wrapping_is_flagged(left: list[int], right: list[int]) -> None:
    n = min(len(left), len(right))
    left, right = left[:n], right[:n]
    a = Wide.of(_duckdb(left, "HUGEINT").column("v"))
    b = Wide.of(_duckdb(right, "HUGEINT").column("v"))
    assert _ints(a) == left
    total, wrapped = a.plus(b)
    fits = [-(2**127) <= x + y < 2**127 for x, y in zip(left, right, strict=True)]
    assert wrapped.tolist() == [not f for f in fits]
    assert [s for s, f in zip(_ints(total), fits, strict=True) if f] == [
        x + y for x, y, f in zip(left, right, fits, strict=True) if f
    ]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(-(10**38) + 1, 10**38 - 1), min_size=1, max_size=60))
def test_conversion_to_double_is_duckdbs(values: list[int]) -> None:
    for type_ in ("HUGEINT", "DECIMAL(38,0)"):
        table = _duckdb(values, type_)
        assert is_wide(table.schema.field("v").type)
        assert Wide.of(table.column("v")).to_float().tolist() == table.column("d").to_pylist()


def test_arrays_round_trip_through_duckdb_with_nulls() -> None:
    con = duckdb.connect()
    con.execute("SET arrow_lossless_conversion = true")
    table = con.sql(
        "SELECT * FROM (VALUES (1.50::DECIMAL(38,2), -3::HUGEINT), (-2.25, 2::HUGEINT << 100),"
        " (NULL, NULL)) AS t(d, h)"
    ).to_arrow_table()
    valid = np.array([True, True, False])
    written = pa.table({
        name: Wide.of(table.column(name)).array(table.schema.field(name).type, valid)
        for name in ("d", "h")
    })
    con.register("written", written)
    assert con.sql("SELECT * FROM written").fetchall() == con.sql(
        "SELECT * FROM (VALUES (1.50::DECIMAL(38,2), -3::HUGEINT), (-2.25, 2::HUGEINT << 100),"
        " (NULL, NULL)) AS t(d, h)"
    ).fetchall()
    assert Wide.of(table.column("d")).low[2] == 0  # a NULL reads as zero


def test_beyond_a_bound_either_way() -> None:
    values = [10**38 - 1, 10**38, -(10**38) + 1, -(10**38), 0, 2**127 - 1]
    wide = Wide.of(_duckdb(values, "HUGEINT").column("v"))
    assert wide.beyond(10**38).tolist() == [False, True, False, True, False, True]


def _wide(values: list[int]) -> Wide:
    """``values`` (each within 128 bits, two's complement) as a ``Wide``."""
    low = np.array([v % 2**64 for v in values], np.uint64)
    high = np.array([(v % 2**128) >> 64 for v in values], np.uint64).view(np.int64)
    return Wide(low, high)


def _near_midpoints(draw: st.DrawFn) -> int:
    """A 128-bit integer at, or one off, a midpoint between two DOUBLEs."""
    bits = draw(st.integers(54, 126))
    mantissa = draw(st.integers(2**52, 2**53 - 1))
    midpoint = (2 * mantissa + 1) << (bits - 54)
    return draw(st.sampled_from([1, -1])) * (midpoint + draw(st.sampled_from([-1, 0, 1])))


MIDPOINTS = st.composite(lambda draw: _near_midpoints(draw))()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(INT128, MIDPOINTS), min_size=1, max_size=60))
def test_nearest_float_rounds_to_nearest_ties_to_even(values: list[int]) -> None:
    assert _wide(values).nearest_float().tolist() == [float(v) for v in values]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63), min_size=1, max_size=40), st.integers(1, 63))
def test_shifts_and_low_bits(values: list[int], bits: int) -> None:
    wide = _wide(values)
    assert _ints(wide.shifted_right(bits)) == [v >> bits for v in values]
    assert _ints(wide.shifted_left(bits)) == [v << bits for v in values]
    assert _ints(wide.low_bits(bits)) == [v % 2**bits for v in values]
    assert wide.nonzero().tolist() == [v != 0 for v in values]
