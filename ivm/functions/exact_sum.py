"""Exact sums of DOUBLE values in DuckDB SQL: fixed point in HUGEINT limbs, rounded once.

A float sum kept as a running DOUBLE carries the rounding of every row it ever
added, deleted rows included (99.9 inserted beside other values, then the others
deleted, may leave 99.89999999999999). Kept here instead, as Materialize keeps
float sums, in fixed point: a finite value v that is a multiple of 2^-SCALE and
below 2^TOP in magnitude (*in range*) is the integer X = v·2^SCALE exactly, split
into LIMBS limbs of 64 bits, X = Σ limbᵢ·2^(64·i) (limbs of |v| in [0, 2^64), the
top one below 2^63, each times v's sign). A group's sum of each limb (times the
rows' weights) is an exact HUGEINT moment, so inserts and deletes cancel exactly,
and the value is the one correctly rounded DOUBLE of the exact sum of the live
values: for one row, the row's value; for several, one of the answers DuckDB's
SUM gives (DuckDB adds rows one by one in the order it reads them, with no
compensation, so its own answer varies with that order: {0.1, 0.2, 0.3} sums to
0.6000000000000001 in that order and to 0.6 in reverse; ivm's is 0.6, the exact
sum rounded once).

The split is exact in DOUBLE arithmetic: scaling by a power of two is exact (no
overflow or underflow in range), ``floor`` is exact, and each limb of |v| is a
difference ``floor(a) − 2^64·floor(a·2^-64)`` whose bits are a subset of ``a``'s,
so representable. Values out of range (below 2^-SCALE's precision, 2^TOP or
beyond) are counted apart by the caller and their groups read from their rows.

Rounding the exact sum X (any integers lᵢ, X = Σ lᵢ·2^(64·i)): with
Hⱼ = floor(X / 2^(64·j)), the highest level j whose |Hⱼ| ≥ 2^54 gives the value
as DOUBLE(2·Hⱼ + s)·2^(64·j − 1 − SCALE), s = 1 when X has bits below 2^(64·j)
(a *sticky* bit: every DOUBLE and every midpoint between two at that magnitude is
a multiple of 2^(64·j+1), and 2·Hⱼ + 1 lies strictly between the same two of them
as X); below every such level X itself fits a HUGEINT. The cast HUGEINT → DOUBLE
is correctly rounded in DuckDB 2 (tests/test_float_sums.py checks it on midpoints),
and the final scaling by a power of two is exact (the result is a normal number).
"""

from __future__ import annotations

LIMBS = 3
"""64-bit limbs of the fixed-point value: 192 bits."""

SCALE = 96
"""Binary digits below the point: values are exact at multiples of 2^-96 (≈1.3e-29),
so any DOUBLE of magnitude at least 2^-44 (≈5.7e-14) is in range."""

TOP = 64 * LIMBS - SCALE - 1
"""Values are in range below 2^TOP (2^95 ≈ 4.0e28) in magnitude: the top limb of |v|
is below 2^63."""

_TWO_64 = "CAST('18446744073709551616' AS HUGEINT)"
_MASK = "CAST('18446744073709551615' AS HUGEINT)"
_STICKY_FROM = "CAST('18014398509481984' AS HUGEINT)"  # 2^54: levels this large round with s


def power(k: int) -> str:
    """2^k as a DOUBLE literal (DuckDB reads the shortest round-trip form exactly)."""
    return repr(2.0**k)


def in_range(v: str) -> str:
    """SQL: DOUBLE ``v`` is finite and held exactly by the limbs."""
    scaled = f"{v} * {power(SCALE)}"
    return f"(isfinite({v}) AND abs({v}) < {power(TOP)} AND floor({scaled}) = {scaled})"


def limb_terms(v: str) -> list[str]:
    """SQL of each limb (HUGEINT) of DOUBLE ``v``, lowest first: 0 where ``v`` is out of
    range or NULL, so every expression stays finite whatever the row."""
    kept = f"(CASE WHEN {in_range(v)} THEN {v} ELSE 0.0 END)"
    sign = f"(CASE WHEN {kept} < 0 THEN -1 ELSE 1 END)"
    # floor(|v|·2^(SCALE − 64·i)): |v|'s bits from 2^(64·i) up, an integer-valued DOUBLE
    floors = [f"floor(abs({kept}) * {power(SCALE - 64 * i)})" for i in range(LIMBS)]
    terms = [f"{floors[i]} - {floors[i + 1]} * {power(64)}" for i in range(LIMBS - 1)]
    terms.append(floors[-1])
    return [f"{sign} * CAST({t} AS HUGEINT)" for t in terms]


def rounded(limbs: list[str]) -> str:
    """SQL: the DOUBLE nearest (ties to even) the exact sum Σ limbsᵢ·2^(64·i − SCALE),
    ``limbs`` being HUGEINT sums of ``limb_terms`` (see the module docstring)."""
    # carry[j] = floor(Σ_{i≤j} lᵢ·2^(64·i) / 2^(64·j)); the top one is H at the top level.
    carry = [limbs[0]]
    for limb in limbs[1:]:
        carry.append(f"({limb} + ({carry[-1]} >> 64))")
    levels = [carry[-1]]  # Hⱼ from the top down
    for j in range(LIMBS - 2, -1, -1):
        levels.append(f"({levels[-1]} * {_TWO_64} + ({carry[j]} & {_MASK}))")
    cases = []
    for depth, h in enumerate(levels[:-1]):
        j = LIMBS - 1 - depth
        below = " OR ".join(f"({carry[i]} & {_MASK}) <> 0" for i in range(j))
        sticky = f"CASE WHEN {below} THEN 1 ELSE 0 END"
        value = f"CAST(2 * {h} + {sticky} AS DOUBLE) * {power(64 * j - 1 - SCALE)}"
        cases.append(f"WHEN abs({h}) >= {_STICKY_FROM} THEN {value}")
    exact = f"CAST({levels[-1]} AS DOUBLE) * {power(-SCALE)}"
    return f"(CASE {' '.join(cases)} ELSE {exact} END)"
