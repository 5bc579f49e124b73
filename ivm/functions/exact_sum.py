"""Exact sums of DOUBLE values in DuckDB SQL: fixed point in HUGEINT limbs, rounded once.

A float sum kept as a running DOUBLE carries the rounding of every row it ever
added, deleted rows included (99.9 inserted beside other values, then the others
deleted, may leave 99.89999999999999). Kept here instead, as Materialize keeps
float sums, in fixed point: a value v that is a multiple of 2^-SCALE and below
2^TOP in magnitude (*in range*: every DOUBLE from 2^-44 ≈ 5.7e-14 to 2^93 ≈ 9.9e27
in magnitude, and smaller ones with few digits) is the integer X = v·2^SCALE
exactly, split into three limbs of 63 bits, X = l₀ + l₁·2^63 + l₂·2^126 (the
limbs of |v|, each below 2^63 so a BIGINT, times v's sign). A group's sum of each
limb (times the rows' weights) is an exact HUGEINT moment, so inserts and deletes
cancel exactly, and the value is the one correctly rounded DOUBLE of the exact sum
of the live values: for one row, the row's value; for several, one of the answers
DuckDB's SUM gives. DuckDB adds rows one by one in the order it reads them, with no
compensation, so its own answer varies with that order: {0.1, 0.2, 0.3} sums to
0.6000000000000001 in that order and to 0.6 in reverse; ivm's is 0.6, the exact
sum rounded once, whatever the order.

The split is exact in DOUBLE arithmetic for values in range: scaling by a power
of two is exact, and so is ``floor``; each limb ``floor(a) − 2^63·floor(a·2^-63)``
has a subset of the bits of ``floor(a)``, so it is representable, and its cast to
BIGINT is exact (a cast from DOUBLE straight to HUGEINT costs ≈7× as much). Out of
range (not finite, too large, or with bits below 2^-SCALE) the limbs are still
computed, from |v| capped below 2^TOP, so they are finite and the same for a row's
insert and its delete: they cancel when the row leaves. The caller counts such
values apart and reads the group's rows while any is live.

Rounding the exact sum X from limb sums lᵢ (any integers, so no normalisation is
kept): with Hⱼ = floor(X / 2^(63·j)), at a level j where |Hⱼ| ≥ 2^54 the value is
DOUBLE(2·Hⱼ + s)·2^(63·j − 1 − SCALE), s = 1 when X has bits below 2^(63·j) (a
*sticky* bit: every DOUBLE and every midpoint between two at that magnitude is a
multiple of 2^(63·j+1), and 2·Hⱼ + 1 lies strictly between the same two of them as
X); below both levels X itself fits a HUGEINT. The cast HUGEINT → DOUBLE is
correctly rounded in DuckDB 2 (tests/test_float_sums.py checks it on midpoints),
and the final scaling by a power of two is exact (the result is a normal number).
"""

from __future__ import annotations

import numpy as np

from ivm.functions.wide_integers import Wide

LIMBS = 3
"""Limbs of the fixed-point value."""

BITS = 63
"""Bits per limb: a limb of one value is a BIGINT; 189 bits in all."""

SCALE = 96
"""Binary digits below the point: values are exact at multiples of 2^-96 (≈1.3e-29)."""

TOP = LIMBS * BITS - SCALE
"""Values are in range below 2^93 (≈9.9e27) in magnitude: the top limb is below 2^63,
and sums of up to 2^40 rows' limbs (|lᵢ| < 2^103) leave HUGEINT room to spare."""

_BASE = f"CAST({2**BITS} AS HUGEINT)"
_MASK = f"CAST({2**BITS - 1} AS HUGEINT)"
_CAP = repr(float.fromhex("0x1.fffffffffffffp92"))  # the largest DOUBLE below 2^TOP


def power(k: int) -> str:
    """2^k as a DOUBLE literal (17 significant digits: DuckDB reads it back exactly)."""
    return f"{2.0**k:.17e}"


def in_range(v: str) -> str:
    """SQL: DOUBLE ``v`` is held exactly by the limbs (false for NaN and ±inf)."""
    scaled = f"{v} * {power(SCALE)}"
    return f"(abs({v}) < {power(TOP)} AND {scaled} = floor({scaled}))"


def limb_terms(v: str) -> list[str]:
    """SQL of each limb (HUGEINT) of DOUBLE ``v``, lowest first: finite for every value
    (see the module docstring), NULL for NULL."""
    magnitude = f"LEAST(abs({v}), {_CAP})"  # ±inf: the cap; NaN and NULL too, but
    sign = f"sign({v})"  # NaN's sign is 0 and NULL's NULL
    # floor(|v|·2^(SCALE − 63·i)): |v|'s bits from 2^(63·i) up, an integer-valued DOUBLE
    floors = [f"floor({magnitude} * {power(SCALE - BITS * i)})" for i in range(LIMBS)]
    terms = [f"{floors[i]} - {floors[i + 1]} * {power(BITS)}" for i in range(LIMBS - 1)]
    terms.append(floors[-1])
    # The sign applied in DOUBLE (exact) before the casts: a HUGEINT product costs more.
    return [f"CAST(CAST({sign} * ({t}) AS BIGINT) AS HUGEINT)" for t in terms]


def rounded(limbs: list[str]) -> str:
    """SQL: the DOUBLE nearest (ties to even) the exact sum (l₀ + l₁·2^63 + l₂·2^126)·2^-SCALE
    of HUGEINT limb sums ``limbs`` (see the module docstring)."""
    l0, l1, l2 = limbs
    carry = f"({l1} + ({l0} >> {BITS}))"  # floor((l₀ + l₁·2^63) / 2^63)
    top = f"({l2} + ({carry} >> {BITS}))"  # H₂
    middle = f"({l2} * {_BASE} + {carry})"  # H₁, where |l₂| < 2^56
    low = f"({l0} & {_MASK})"  # X mod 2^63
    below_top = f"CASE WHEN ({carry} & {_MASK}) <> 0 OR {low} <> 0 THEN 1 ELSE 0 END"
    below_middle = f"CASE WHEN {low} <> 0 THEN 1 ELSE 0 END"
    # |l₁|, |l₀| < 2^103, so |l₂| ≥ 2^56 means |H₂| ≥ 2^55.
    return (
        f"(CASE WHEN abs({l2}) >= {2**56} "
        f"THEN CAST(2 * {top} + {below_top} AS DOUBLE) * {power(2 * BITS - 1 - SCALE)} "
        f"WHEN abs({middle}) >= {2**54} "
        f"THEN CAST(2 * {middle} + {below_middle} AS DOUBLE) * {power(BITS - 1 - SCALE)} "
        f"ELSE CAST({middle} * {_BASE} + {low} AS DOUBLE) * {power(-SCALE)} END)"
    )


def rounded_in_memory(l0: Wide, l1: Wide, l2: Wide) -> np.ndarray:
    """``rounded`` in memory: the DOUBLE nearest (ties to even) each exact sum
    (l₀ + l₁·2^63 + l₂·2^126)·2^-SCALE of 128-bit limb sums (each below 2^103 in
    magnitude), by the same levels as the SQL."""
    carry, _ = l1.plus(l0.shifted_right(BITS))
    top, _ = l2.plus(carry.shifted_right(BITS))
    middle, _ = l2.shifted_left(BITS).plus(carry)
    low = l0.low_bits(BITS)
    at_top = l2.beyond(2**56)
    at_middle = ~at_top & middle.beyond(2**54)
    top_sticky = carry.low_bits(BITS).nonzero() | low.nonzero()
    doubled_top, _ = top.shifted_left(1).plus(_bits(top_sticky))
    doubled_middle, _ = middle.shifted_left(1).plus(_bits(low.nonzero()))
    whole, _ = middle.shifted_left(BITS).plus(low)  # |H₁| < 2^54 here: below 2^117
    return np.where(
        at_top,
        doubled_top.nearest_float() * 2.0 ** (2 * BITS - 1 - SCALE),
        np.where(
            at_middle,
            doubled_middle.nearest_float() * 2.0 ** (BITS - 1 - SCALE),
            whole.nearest_float() * 2.0**-SCALE,
        ),
    )


def _bits(flags: np.ndarray) -> Wide:
    """Booleans as the numbers 0 and 1."""
    return Wide(flags.astype(np.uint64), np.zeros(len(flags), np.int64))


def total(v: str, weight: str | None = None, condition: str = "") -> str:
    """SQL of an aggregate over rows: the exact sum of DOUBLE ``v`` (times ``weight``, SQL
    of each row's copies, if given) rounded once, over rows where ``condition`` (a FILTER
    clause, or ""). Where a value is out of range, DuckDB's SUM instead (over NaN and the
    infinities it gives the same in any order); NULL over no value."""

    def times(term: str) -> str:
        return f"{term} * {weight}" if weight else term

    sums = ", ".join(f"SUM({times(t)}){condition}" for t in limb_terms(v))
    # The limbs' sums, bound once to a lambda's parameter, so each is written once.
    limbs = [f"__ivm_l[{i + 1}]" for i in range(LIMBS)]
    exact = f"list_transform([[{sums}]], lambda __ivm_l: {rounded(limbs)})[1]"
    return (
        f"CASE WHEN COUNT({v}){condition} = 0 THEN NULL "
        f"WHEN bool_or(NOT {in_range(v)}){condition} THEN SUM({times(v)}){condition} "
        f"ELSE {exact} END"
    )
