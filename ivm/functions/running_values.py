"""Running forms in memory: ``combine``, ``flag`` and ``finalize`` of ``ivm.functions.running``
over Arrow arrays, for the in-memory step of ``ivm.operators.running_step``.

Each function is the Arrow twin of a form's SQL, with the same three-valued logic and
arithmetic, so a group's state and value are the same whichever computed them. Inputs
are aligned by group: the old state (NULL for a group new this epoch), the change's
partials, and the new moments (no NULLs: int64 counts, 128-bit limb sums). None where a
type is one this module does not compare as DuckDB does (the statement steps then):
floats holding NaN (DuckDB orders NaN above every number and equal to itself, Arrow by
IEEE), and types other than numbers, decimals, strings and dates or times.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ivm.functions.exact_sum import rounded_in_memory
from ivm.functions.running import Exact, Extreme, FloatSum, Running
from ivm.functions.wide_integers import Wide, is_wide

Arrays = Mapping[str, pa.Array]
"""A form's columns (moments, state or partials) by name, one value per group."""


def combined(
    form: Running, old: Arrays, part: Arrays, new: Arrays
) -> dict[str, pa.Array] | None:
    """``form.combine`` in memory: each state column after the change."""
    if isinstance(form, Exact):
        return {}
    if isinstance(form, FloatSum):
        return _float_sum_state(new)
    if isinstance(form, Extreme):
        return _extreme_state(form, old, part, new)
    return None


def flagged(form: Running, new: Arrays, groups: int) -> np.ndarray:
    """``form.flag`` in memory: where the group's state cannot give the value."""
    if isinstance(form, FloatSum):
        n, up, down, out = (_ints(new[k]) for k in ("n", "up", "down", "out"))
        return (n > 0) & (up == 0) & (down == 0) & (out > 0)
    if isinstance(form, Extreme):
        return (_ints(new["n"]) > 0) & np.asarray(new["m"].is_null().to_numpy(False), bool)
    return np.zeros(groups, bool)


def value(form: Running, new: Arrays) -> pa.Array | None:
    """``form.finalize`` in memory: the value (DuckDB casts it to the call's type)."""
    if isinstance(form, Exact):
        assert form.invertible is not None
        compute = form.invertible.compute
        return None if compute is None else compute(new)
    if isinstance(form, FloatSum):
        return _float_sum_value(form, new)
    if isinstance(form, Extreme):
        return new["m"]
    return None


def _ints(array: pa.Array) -> np.ndarray:
    """An int64 array's values (NULL as 0)."""
    return np.asarray(array.fill_null(0).to_numpy(zero_copy_only=False), np.int64)


def _float_sum_state(new: Arrays) -> dict[str, pa.Array] | None:
    """``s``: the limbs' exact sum rounded once, NULL where a value out of range is live."""
    limbs = [new[f"l{i}"] for i in range(3)]
    if not all(is_wide(a.type) for a in limbs):
        return None
    total = rounded_in_memory(*(Wide.of(a) for a in limbs))
    return {"s": pa.array(total, pa.float64(), mask=_ints(new["out"]) > 0)}


def _float_sum_value(form: FloatSum, new: Arrays) -> pa.Array:
    """NULL without values; NaN, ±inf where non-finite values are live; else the sum
    (or the average)."""
    n, up, down = (_ints(new[k]) for k in ("n", "up", "down"))
    s = new["s"]
    finite = np.asarray(s.fill_null(0.0).to_numpy(zero_copy_only=False), np.float64)
    unknown = np.asarray(s.is_null().to_numpy(zero_copy_only=False), bool)
    if form.average:
        with np.errstate(divide="ignore", invalid="ignore"):
            finite = finite / np.where(n == 0, 1, n)
    values = np.where(
        (up > 0) & (down > 0), np.nan,
        np.where(up > 0, np.inf, np.where(down > 0, -np.inf, finite)),
    )
    return pa.array(values, pa.float64(), mask=(n == 0) | ((up == 0) & (down == 0) & unknown))


def _extreme_state(
    form: Extreme, old: Arrays, part: Arrays, new: Arrays
) -> dict[str, pa.Array] | None:
    """``m`` and ``c`` as ``Extreme.combine`` gives them."""
    m = old["m"]
    try:
        ib, db = part["ib"].cast(m.type), part["db"].cast(m.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if not all(_comparable(a) for a in (m, ib, db)):
        return None
    better = pc.greater if form.largest else pc.less  # better(a, b): a is better than b
    try:
        best = (pc.max_element_wise if form.largest else pc.min_element_wise)(
            m, ib, skip_nulls=True
        )
        deleted_best = _true(pc.equal(db, m))
        ib_is_m, ib_better = _true(pc.equal(ib, m)), _true(better(ib, m))
        m_better = better(m, ib)  # NULL where either is: three-valued, as in SQL
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    ic, dn, inserted = part["ic"], _ints(part["dn"]), part["in"]
    left = _ints(old["c"]) - np.where(deleted_best, dn, 0)
    refilled = pc.equal(pa.array(_ints(new["n"]), pa.int64()), inserted)
    take = _true(pc.or_kleene(pc.or_kleene(pc.invert(m_better), m.is_null()), refilled))
    kept = left > 0
    taken = pc.if_else(pa.array(take), ib, pa.nulls(len(m), m.type))
    m_new = pc.if_else(pa.array(kept), best, taken)
    counted = np.where(ib_is_m, left + _ints(ic), np.where(ib_better, _ints(ic), left))
    ic_null = np.asarray(ic.is_null().to_numpy(zero_copy_only=False), bool)
    c_new = np.where(kept, counted, np.where(take, _ints(ic), 0))
    return {"m": m_new, "c": pa.array(c_new, pa.int64(), mask=~kept & take & ic_null)}


def _true(flags: pa.Array) -> np.ndarray:
    """Where a boolean array is true (NULL is not)."""
    return np.asarray(flags.fill_null(False).to_numpy(zero_copy_only=False), bool)


def _comparable(array: pa.Array) -> bool:
    """Whether Arrow orders ``array``'s values as DuckDB does."""
    t = array.type
    if pa.types.is_floating(t):
        return not bool(pc.any(pc.is_nan(array)).as_py())
    return (
        pa.types.is_integer(t) or pa.types.is_decimal(t) or pa.types.is_string(t)
        or pa.types.is_large_string(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)
        or pa.types.is_time(t)
    )
