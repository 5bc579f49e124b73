"""functions.exact_sum: the limbs' exact sum rounded once, in memory as in SQL: the DOUBLE
nearest the exact value (ties to even), whatever the limbs' signs and sizes."""

from __future__ import annotations

from fractions import Fraction

import duckdb
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ivm.functions import exact_sum
from ivm.functions.wide_integers import Wide

LIMB = st.one_of(
    st.just(0),
    st.integers(-(2**63), 2**63),
    st.integers(-(2**102), 2**102),  # sums of many rows' limbs: below 2^103
)
LIMBS = st.lists(st.tuples(LIMB, LIMB, LIMB), min_size=1, max_size=40)


def _wide(values: list[int]) -> Wide:
    low = np.array([v % 2**64 for v in values], np.uint64)
    high = np.array([(v % 2**128) >> 64 for v in values], np.uint64).view(np.int64)
    return Wide(low, high)


def _exact(limbs: tuple[int, int, int]) -> float:
    l0, l1, l2 = limbs
    return float(Fraction(l0 + l1 * 2**63 + l2 * 2**126, 2**exact_sum.SCALE))


@settings(max_examples=60, deadline=None)
@given(LIMBS)
def test_in_memory_rounding_is_the_exact_sums_nearest_double(
    rows: list[tuple[int, int, int]],
) -> None:
    columns = [_wide([row[i] for row in rows]) for i in range(3)]
    assert exact_sum.rounded_in_memory(*columns).tolist() == [_exact(r) for r in rows]


@settings(max_examples=15, deadline=None)
@given(LIMBS)
def test_sql_rounding_is_the_same(rows: list[tuple[int, int, int]]) -> None:
    values = ", ".join(f"({a}::HUGEINT, {b}::HUGEINT, {c}::HUGEINT)" for a, b, c in rows)
    sql = f"SELECT {exact_sum.rounded(['a', 'b', 'c'])} FROM (VALUES {values}) AS t(a, b, c)"
    got = [r[0] for r in duckdb.connect().execute(sql).fetchall()]
    assert got == [_exact(r) for r in rows]


def test_a_tie_rounds_to_even() -> None:
    # 2^53 + 1 (a tie between 2^53 and 2^53 + 2) at the lowest limb's scale, and + 3.
    one = 2**exact_sum.SCALE
    rows = [((2**53 + 1) * one % 2**63, (2**53 + 1) * one // 2**63, 0),
            ((2**53 + 3) * one % 2**63, (2**53 + 3) * one // 2**63, 0)]
    columns = [_wide([row[i] for row in rows]) for i in range(3)]
    assert exact_sum.rounded_in_memory(*columns).tolist() == [2.0**53, 2.0**53 + 4]
