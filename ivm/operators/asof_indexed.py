"""An ASOF join's epoch through its sides' time order, kept in memory (embedded mode).

Where the executor keeps memory for the operator (``Run.memory``), each side's live
points (key, time) are kept sorted (``TimeIndex``, built from the side's integral at
first use and brought up to date after each epoch commits). The epoch then asks its
questions of order there, in binary searches over ~1k points, and reads only the rows
it needs from the traces, by equality on (keys, time):

1. The changes' distinct points, with their weights and key values (one small query
   per changed side).
2. *Affected* left points: every point of the left change, and for each changed right
   point c of key k, the left points of k between c and the nearest live right time past
   it on the side matches lie (before or after the epoch, whichever is nearer): only
   there can c be a match, before or after. Each gets its match time before the epoch
   (in the old right index) and after it (the new one), and is kept only if its rows
   changed, its match time moved, or its match's point changed (the row chosen there may
   have): exact, where a SQL window per key is not.
3. One statement: the left rows at the affected points (the old ones from the trace,
   plus the change), the right rows at their old and new match points (from the trace
   and the change), each point's rows consolidated and de-tied as ``plain`` does
   (``deduplicated_right_sql``), joined; the change is the new pairs minus the old.
   When the right side does not change, the old pairs are the new ones: only the left
   change's rows are joined (the join is linear in its left).

Left rows with a NULL key or time never match; they stay out of the indexes, and in an
ASOF LEFT JOIN the change's such rows are emitted with NULLs. If a change does not fit
an index (a point would be left with fewer than no rows), the memory is cleared and the
caller computes the epoch in SQL alone (``indexed_change`` returns False).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ivm.operators.asof_reads import deduplicated_right_sql
from ivm.operators.base import Operator, Run, SavedMemory
from ivm.operators.time_index import (
    TOP,
    TimeIndex,
    has_time_code,
    nearest_in,
    points_of,
    split_points,
    time_code_sql,
    time_value_sql,
)
from ivm.plan.sql import W, column_list
from ivm.schema import quote
from ivm.storage.distinct import distinct, members
from ivm.storage.sqltext import hashes_halves

if TYPE_CHECKING:
    from ivm.operators.asof_join import AsOfJoin

SIDES = "time_indexes"
"""The memory entry holding the two sides' ``TimeIndex`` (``Sides``)."""
KEY_HASH, TIME_CODE, ROWS = "__ivm_kh", "__ivm_tc", "__ivm_rows"
POINTS, WANTED = "__ivm_asof_points", "__ivm_asof_wanted"
"""The names the epoch's statement reads the affected points and the right points by
(Arrow tables)."""


@dataclass(frozen=True)
class Sides:
    """The live points of the left and right inputs before the epoch."""

    left: TimeIndex
    right: TimeIndex

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Both indexes as named arrays (saved when a persistent session closes)."""
        return {f"{side}.{name}": array for side, index in (("left", self.left),
                                                             ("right", self.right))
                for name, array in index.to_arrays().items()}

    @staticmethod
    def from_arrays(arrays: Mapping[str, np.ndarray]) -> Sides:
        """The sides ``to_arrays`` gave ``arrays`` of (ValueError if they do not fit)."""
        def side(prefix: str) -> TimeIndex:
            return TimeIndex.from_arrays({n.split(".", 1)[1]: a for n, a in arrays.items()
                                          if n.startswith(prefix + ".")})
        try:
            return Sides(side("left"), side("right"))
        except KeyError as missing:
            raise ValueError(f"time index array {missing} missing") from None


@dataclass(frozen=True)
class Points:
    """A change's distinct points: key hashes, time codes, summed weights and key values
    (a table with the key columns, one row per point)."""

    keys: np.ndarray
    times: np.ndarray
    weights: np.ndarray
    values: pa.Table


def indexable(node: AsOfJoin) -> bool:
    """Whether both sides' time order can be kept: the time columns' type has a code
    (``time_index.has_time_code``) and each pair of compared columns has one type (so
    that both sides hash and code alike)."""
    lschema, rschema = node.left.schema, node.right.schema
    pairs = [*node.keys, (node.left_time, node.right_time)]
    return has_time_code(rschema.type_of(node.right_time)) and all(
        lschema.type_of(a) == rschema.type_of(b) for a, b in pairs
    )


def indexed_change(
    op: Operator, node: AsOfJoin, run: Run, memory: dict[str, Any], kept: Sides | None,
    left_change: str | None, right_change: str | None,
) -> str | None | bool:
    """SQL of the epoch's change read through the time indexes (module docstring), those
    ``kept`` in ``memory`` (``kept_sides``) or, if none, built now; None when nothing
    changes; False when the indexes cannot be used (memory cleared)."""
    sides = kept or _load(op, node, run)
    lkeys, rkeys = [a for a, _ in node.keys], [b for _, b in node.keys]
    ttype = node.right.schema.type_of(node.right_time)
    left_points = _points(op, node, run, left_change, lkeys, node.left_time, ttype, lkeys)
    right_points = _points(op, node, run, right_change, rkeys, node.right_time, ttype, lkeys)
    left = sides.left if left_points is None else sides.left.updated(
        left_points.keys, left_points.times, left_points.weights)
    right = sides.right if right_points is None else sides.right.updated(
        right_points.keys, right_points.times, right_points.weights)
    if left is None or right is None:
        memory.clear()
        return False
    memory[SIDES] = sides
    run.after_commit(lambda: memory.update({SIDES: Sides(left, right)}))
    rows, wanted = _moved(node, sides.right, right, left_points, right_points,
                          _affected(sides, right, left_points, right_points, node.op))
    if not len(rows) and not (node.outer and left_change is not None):
        return None
    return run.materialize(op, "output", _change_sql(
        node, run.integral(op.inputs[0]), run.integral(op.inputs[1]), left_change,
        right_change,
    ), rows={POINTS: rows, WANTED: wanted})


def _moved(
    node: AsOfJoin, old: TimeIndex, new: TimeIndex, left_points: Points | None,
    right_points: Points | None, affected: np.ndarray,
) -> tuple[pa.Table, pa.Table]:
    """Of the ``affected`` left points, those whose output changes (module docstring,
    2), with their old and new match times (``POINTS``); and the right points their
    matches are read at (``WANTED``)."""
    before, strict = node.op in (">=", ">"), node.op in (">", "<")
    keys, times = split_points(affected)
    (old_match, old_found), (new_match, new_found) = nearest_in(
        [old, new], keys, times, before, strict)
    keep = (old_found != new_found) | (new_found & (old_match != new_match))
    if left_points is not None:
        keep |= members(affected, points_of(left_points.keys, left_points.times))
    if right_points is not None:
        changed = points_of(right_points.keys, right_points.times)
        keep |= old_found & members(points_of(keys, old_match), changed)
    changes = [p for p in (left_points, right_points) if p is not None]
    rows = _with_key_values(pa.table({
        "__lt": times[keep],
        "__old": pa.array(old_match[keep], mask=~old_found[keep]),
        "__new": pa.array(new_match[keep], mask=~new_found[keep]),
    }), changes, keys[keep])
    matches = distinct(np.concatenate([
        points_of(keys[keep & found], match[keep & found])
        for match, found in ((old_match, old_found), (new_match, new_found))
    ]))
    match_keys, match_times = split_points(matches)
    return rows, _with_key_values(pa.table({"__rt": match_times}), changes, match_keys)


def kept_sides(memory: dict[str, Any]) -> Sides | None:
    """The sides kept in ``memory`` (None: none). Sides a closed session saved are taken
    back here, in place (the same points: no epoch's change), or dropped if unusable."""
    kept = memory.get(SIDES)
    if isinstance(kept, SavedMemory):
        try:
            kept = memory[SIDES] = Sides.from_arrays(kept.arrays)
        except ValueError:
            del memory[SIDES]
            return None
    return kept


def build_sides(op: Operator, node: AsOfJoin, run: Run, memory: dict[str, Any]) -> None:
    """Build both sides' indexes from their integrals into ``memory`` (run after the
    epoch of a first load commits, so that the load pays for them, not the next epoch)."""
    memory[SIDES] = _load(op, node, run)


def _load(op: Operator, node: AsOfJoin, run: Run) -> Sides:
    """Both sides' indexes, from their integrals."""
    ttype = node.right.schema.type_of(node.right_time)
    indexes = []
    for side, keys, time in (
        (0, [a for a, _ in node.keys], node.left_time),
        (1, [b for _, b in node.keys], node.right_time),
    ):
        rows = run.fetch(op, (  # sorted by DuckDB, summed per point by numpy (faster)
            f"SELECT {_point_columns(node, keys, time, ttype)}, CAST({W} AS BIGINT) AS {ROWS} "
            f"FROM ({run.integral(op.inputs[side])}) AS __s WHERE {_present(keys, time)} "
            f"ORDER BY {KEY_HASH}, {TIME_CODE}"
        ))
        indexes.append(TimeIndex.of(*_arrays(rows), ordered=True))
    return Sides(*indexes)


def _points(
    op: Operator, node: AsOfJoin, run: Run, change: str | None, keys: Sequence[str], time: str,
    ttype: str, names: Sequence[str],
) -> Points | None:
    """The distinct points of ``change`` (None: no change), the key values named ``names``."""
    if change is None:
        return None
    values = "".join(f", {quote(k)} AS {quote(n)}" for k, n in zip(keys, names, strict=True))
    rows = run.fetch(op, (
        f"SELECT {_point_columns(node, keys, time, ttype)}, CAST(SUM({W}) AS BIGINT) AS {ROWS}"
        f"{values} "
        f"FROM ({change}) AS __s WHERE {_present(keys, time)} GROUP BY ALL"
    ))
    hashes, codes, weights = _arrays(rows)
    values = rows.select(list(range(3, rows.num_columns)))
    return Points(hashes, codes, weights, values)


def _affected(
    old: Sides, right: TimeIndex, left_points: Points | None, right_points: Points | None,
    op: str,
) -> np.ndarray:
    """The left points whose match may change (module docstring, 2), sorted, distinct."""
    before = op in (">=", ">")
    found = [points_of(left_points.keys, left_points.times)] if left_points else []
    if right_points is not None:
        keys, times = right_points.keys, right_points.times
        # the neighbour on the side matches lie: after the change if they lie before the
        # left time, else before it; the nearer of the old and the new one
        reach = np.full(len(keys), TOP if before else -TOP, dtype=np.int64)
        nearer = np.minimum if before else np.maximum
        for near, there in nearest_in([old.right, right], keys, times, not before, True):
            reach = np.where(there, nearer(reach, near), reach)
        low, high = (times, reach) if before else (reach, times)
        found.append(old.left.between(keys, low, high))
    if not found:
        return np.empty(0, dtype="S16")
    return distinct(np.concatenate(found))


def _with_key_values(rows: pa.Table, changes: Sequence[Points], keys: np.ndarray) -> pa.Table:
    """``rows`` with the key columns' values of each row's key hash ``keys`` (every one is
    a key of one of ``changes``)."""
    hashes = np.concatenate([p.keys for p in changes])
    values = pa.concat_tables([p.values for p in changes])
    distinct, first = np.unique(hashes, return_index=True)
    values = values.take(pa.array(first[np.searchsorted(distinct, keys)], type=pa.int64()))
    for name, column in zip(values.column_names, values.columns, strict=True):
        rows = rows.append_column(name, column)
    return rows


def _change_sql(
    node: AsOfJoin, left_old: str, right_old: str, left_change: str | None,
    right_change: str | None,
) -> str:
    """The statement of step 3 (module docstring), reading the affected points as
    ``POINTS`` (the left key columns, ``__lt``, ``__old``, ``__new``: time codes) and the
    right points it reads as ``WANTED`` (the left key columns, ``__rt``)."""
    lkeys, rkeys = [a for a, _ in node.keys], [b for _, b in node.keys]
    lt, rt = node.left_time, node.right_time
    ttype = node.right.schema.type_of(rt)
    lnames, rnames = node.left.schema.names, node.right.schema.names

    def at(keys: Sequence[str], time: str, wanted: str, wanted_time: str) -> str:
        """``__x`` (columns ``keys``, ``time``) is at a point of ``wanted`` (left keys)."""
        terms = [f"__x.{quote(k)} = {wanted}.{quote(a)}" for k, a in zip(keys, lkeys, strict=True)]
        return " AND ".join([*terms, f"__x.{quote(time)} = {wanted}.{wanted_time}"])

    def read(rows: str, keys: Sequence[str], time: str, wanted: str, wanted_time: str) -> str:
        """The rows of ``rows`` at a point of ``wanted``."""
        return (f"SELECT __x.* FROM ({rows}) AS __x SEMI JOIN {wanted} "
                f"ON {at(keys, time, wanted, wanted_time)}")

    def read_trace(name: str, rows: str, keys: Sequence[str], time: str, wanted: str,
                   wanted_time: str) -> list[str]:
        """CTE ``name``: ``read`` of a trace, first narrowed to the rows at one of the
        wanted times (a join on one column, for which DuckDB filters the scan; joined on
        the keys too, the scan would compare every row's keys with theirs' range first)."""
        times = (f"SELECT __z.* FROM ({rows}) AS __z SEMI JOIN (SELECT DISTINCT {wanted_time} "
                 f"FROM {wanted}) AS __t ON __z.{quote(time)} = __t.{wanted_time}")
        exact = read(f"SELECT * FROM {name}_at", keys, time, wanted, wanted_time)
        return [f"{name}_at AS MATERIALIZED ({times})", f"{name} AS MATERIALIZED ({exact})"]

    def pairs(left: str, matches: str, match_time: str, sign: str) -> str:
        """``left``'s rows at their point, each with its match at ``match_time``."""
        match = at(rkeys, rt, "__a", match_time)
        return (
            f"SELECT {column_list(lnames, '__x')}, {column_list(rnames, '__r')}, "
            f"{sign}__x.{W} AS {W} FROM {left} AS __x JOIN __a ON {at(lkeys, lt, '__a', '__lt')} "
            f"{'LEFT JOIN' if node.outer else 'JOIN'} {matches} AS __r "
            f"ON {match.replace('__x.', '__r.')}"
        )

    decode = ", ".join(f"{time_value_sql(c, ttype)} AS {c}" for c in ("__lt", "__old", "__new"))
    ctes = [
        f"__a AS (SELECT * EXCLUDE (__lt, __old, __new), {decode} FROM {POINTS})",
        f"__p AS (SELECT * EXCLUDE (__rt), {time_value_sql('__rt', ttype)} AS __rt "
        f"FROM {WANTED})",
        *read_trace("__r_old", right_old, rkeys, rt, "__p", "__rt"),
    ]
    new_right = "SELECT * FROM __r_old"
    if right_change is not None:
        new_right += f" UNION ALL {read(right_change, rkeys, rt, '__p', '__rt')}"
    ctes.append(f"__m_new AS MATERIALIZED ({deduplicated_right_sql(node, new_right, True)})")
    left_new, parts = [], []
    if right_change is not None:  # the old rows' matches may move: their pairs are redone
        old_right = deduplicated_right_sql(node, "SELECT * FROM __r_old", True)
        ctes += read_trace("__l_old", left_old, lkeys, lt, "__a", "__lt")
        ctes.append(f"__m_old AS MATERIALIZED ({old_right})")
        left_new.append("SELECT * FROM __l_old")
        parts.append(pairs("__l_old", "__m_old", "__old", "-"))
    if left_change is not None:
        present = _present(lkeys, lt)
        left_new.append(f"SELECT * FROM ({left_change}) AS __d WHERE {present}")
        if node.outer:  # rows that can never match keep NULLs
            nulls = ", ".join(f"NULL AS {quote(c)}" for c in rnames)
            parts.append(f"SELECT {column_list(lnames)}, {nulls}, {W} FROM ({left_change}) "
                         f"AS __d WHERE NOT ({present})")
    ctes.append(f"__l_new AS ({' UNION ALL '.join(left_new)})")
    parts.append(pairs("__l_new", "__m_new", "__new", ""))
    return f"WITH {', '.join(ctes)} " + " UNION ALL ".join(
        f"SELECT * FROM ({p}) AS __q{i}" for i, p in enumerate(parts)
    )


def _point_columns(node: AsOfJoin, keys: Sequence[str], time: str, ttype: str) -> str:
    """SQL of a row's point: its key hash and time code. A key one side of which is a
    128-bit number (``hashes_halves``: 0 and -1 hash alike) is hashed with its value as
    DOUBLE too (equal keys, whatever their types, are equal doubles), a UUID with its text."""
    terms = []
    for key, (left, right) in zip(keys, node.keys, strict=True):
        terms.append(quote(key))
        types = (node.left.schema.type_of(left), node.right.schema.type_of(right))
        if any(hashes_halves(t) for t in types):
            uuid = any(t.upper() == "UUID" for t in types)
            terms.append(f"CAST({quote(key)} AS {'VARCHAR' if uuid else 'DOUBLE'})")
    hashed = f"hash({', '.join(terms)})" if keys else "CAST(0 AS UBIGINT)"
    return f"{hashed} AS {KEY_HASH}, {time_code_sql(quote(time), ttype)} AS {TIME_CODE}"


def _present(keys: Sequence[str], time: str) -> str:
    return " AND ".join(f"{quote(c)} IS NOT NULL" for c in [*keys, time])


def _arrays(rows: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Key hashes, time codes and weights of a fetched table of points."""
    return (
        rows.column(KEY_HASH).to_numpy().astype(np.uint64),
        rows.column(TIME_CODE).to_numpy().astype(np.int64),
        rows.column(ROWS).to_numpy().astype(np.int64),
    )
