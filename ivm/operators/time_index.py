"""One side of an ASOF join in time order: its live (key, time) points, sorted, in memory.

An ASOF join asks questions of order: a left row's match is the nearest live right time
of its key on one side of its own time; a changed right time moves the matches of the
left times between it and its live neighbour. DuckDB keeps no table sorted, so in SQL
each such question scans every row of the key. A ``TimeIndex`` answers them with binary
searches (``numpy.searchsorted``) over the side's *points*: one per distinct (key, time)
among its live rows, with the number of live rows there.

A point is a 16-byte string, so that one sorted array orders keys, then times: the
key's hash (DuckDB's ``hash`` of the equality columns, big-endian), then the time as a
signed 64-bit number with its sign bit flipped (big-endian, so that byte order is
numeric order). ``time_code_sql`` says which column types have such a number (integers,
DATE, TIMESTAMP, TIMESTAMP WITH TIME ZONE, TIMESTAMP_NS; infinities at the ends) and
``time_value_sql`` turns a number back into the column's type.

Two keys with one hash would share their points: their times would interleave and a
match could be taken from the other key (chance 2⁻⁶⁴ per pair of keys, as for the base
tables' row index). A side of n distinct points costs 24·n bytes; an update costs its
change's points, and once per that many points as 1/16 of n, a merge (O(n): see
``TimeIndex``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ivm import faults
from ivm.storage.distinct import distinct

SIGN = np.uint64(1 << 63)
"""The sign bit of a time code, flipped so that unsigned byte order is numeric order."""
MERGE_MIN = 65_536
MERGE_FRACTION = 1 / 16
"""A ``TimeIndex``'s changed base positions and tail are merged into its base once they
hold more than this many points and this fraction of the base's."""
ARRAYS_FORMAT = 1
"""The layout of ``TimeIndex.to_arrays`` and the points' encoding (``points_of``,
``time_code_sql``): bump it when either changes, so that saved indexes are built again."""
TOP = 2**63 - 1
"""The number of +infinity (and, negated, of -infinity): past every finite time."""

_INTEGERS = {
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
}
_TIMESTAMPS = {  # type: (number of a value, value of a number)
    "TIMESTAMP": ("epoch_us({})", "make_timestamp({})"),
    "TIMESTAMP WITH TIME ZONE": ("epoch_us({})", "make_timestamptz({})"),
    "TIMESTAMP_NS": ("epoch_ns({})", "make_timestamp_ns({})"),
    "DATE": ("({} - DATE '1970-01-01')", "(DATE '1970-01-01' + CAST({} AS INTEGER))"),
}


TIME_CODE_TYPES = tuple(sorted(_INTEGERS | set(_TIMESTAMPS)))
"""Every column type with a time code."""


def has_time_code(type_: str) -> bool:
    """Whether a column of DuckDB type ``type_`` can be a ``TimeIndex``'s time."""
    return type_ in TIME_CODE_TYPES


def time_code_sql(column: str, type_: str) -> str:
    """SQL of the BIGINT that orders like ``column`` (of type ``type_``; NULL stays NULL)."""
    if type_ in _INTEGERS:
        return f"CAST({column} AS BIGINT)"
    number = _TIMESTAMPS[type_][0].format(column)
    return (
        f"CASE WHEN isinf({column}) THEN CASE WHEN {column} > DATE '1970-01-01' "
        f"THEN {TOP} ELSE {-TOP} END ELSE CAST({number} AS BIGINT) END"
    )


def time_value_sql(code: str, type_: str) -> str:
    """SQL of the value of type ``type_`` whose ``time_code_sql`` is ``code``."""
    if type_ in _INTEGERS:
        return f"CAST({code} AS {type_})"
    value = _TIMESTAMPS[type_][1].format(code)
    return (
        f"CASE {code} WHEN {TOP} THEN CAST('infinity' AS {type_}) "
        f"WHEN {-TOP} THEN CAST('-infinity' AS {type_}) ELSE {value} END"
    )


def points_of(keys: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The points (16-byte strings, see the module docstring) of key hashes ``keys``
    (uint64) and time codes ``times`` (int64)."""
    pairs = np.empty((len(keys), 2), dtype=">u8")
    pairs[:, 0] = keys
    pairs[:, 1] = times.astype(np.int64).view(np.uint64) ^ SIGN
    return pairs.view("S16").ravel()


def split_points(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The key hashes and time codes of ``points`` (inverse of ``points_of``)."""
    pairs = np.ascontiguousarray(points).view(">u8").reshape(-1, 2)
    keys = pairs[:, 0].astype(np.uint64)
    times = (pairs[:, 1].astype(np.uint64) ^ SIGN).view(np.int64)
    return keys, times


def _found(sorted_: np.ndarray, at: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Which of ``points`` are in ``sorted_`` at their search position ``at``."""
    if not len(sorted_):
        return np.zeros(len(points), dtype=bool)
    return (at < len(sorted_)) & (sorted_[np.minimum(at, len(sorted_) - 1)] == points)


def _ranges(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The positions of every range [start[i], end[i]), concatenated."""
    sizes = np.maximum(end - start, 0)
    total = int(sizes.sum())
    return np.repeat(start - np.cumsum(sizes) + sizes, sizes) + np.arange(total)


@dataclass(frozen=True)
class TimeIndex:
    """The live points of one side of an ASOF join, sorted; immutable (``updated`` makes
    the next version, sharing the large arrays with this one).

    Levels, so that an epoch costs what its change costs: a *base* of points with their
    counts as of its last merge, the base positions whose count changed since (and the
    count now: 0 for a point no longer live), and a sorted *tail* of the points added
    since. A search looks in both, skipping runs of dead base points. Once the changed
    positions and the tail hold more than ``MERGE_MIN`` and ``MERGE_FRACTION`` of the
    base, they are merged into a new base (O(n), once per that many changed points)."""

    base: np.ndarray  # 16-byte points, sorted, distinct
    base_counts: np.ndarray  # int64 > 0: live rows at each, as of the last merge
    changed: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    changed_counts: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    tail: np.ndarray = field(default_factory=lambda: np.empty(0, "S16"))
    tail_counts: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    @staticmethod
    def of(
        keys: np.ndarray, times: np.ndarray, weights: np.ndarray, ordered: bool = False
    ) -> TimeIndex:
        """The index of a Z-set's live rows, given as (key hash, time code, weight) per
        row or per point, in any order (``ordered``: sorted by key hash, then time code,
        which is checked); a point is live where its weights sum to more than 0."""
        keys = np.asarray(keys, dtype=np.uint64)
        times = np.asarray(times, dtype=np.int64)
        weights = np.asarray(weights, dtype=np.int64)
        same_key = keys[1:] == keys[:-1]
        if not (ordered and bool(((keys[1:] > keys[:-1]) | same_key & (times[1:] >= times[:-1]))
                                 .all())):  # checked: O(n), once
            order = np.lexsort((times, keys))
            keys, times, weights = keys[order], times[order], weights[order]
            same_key = keys[1:] == keys[:-1]
        first = np.append(True, ~same_key | (times[1:] != times[:-1]))[:len(keys)]
        if not first.all():  # a point of several rows: their weights summed
            starts = np.flatnonzero(first)
            keys, times, weights = keys[starts], times[starts], np.add.reduceat(weights, starts)
        live = weights > 0
        points = points_of(keys[live], times[live])
        return TimeIndex(points, weights[live])

    def __len__(self) -> int:
        return len(self.base) - len(self._dead) + len(self.tail)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The index as named arrays (``from_arrays`` takes them back; none is changed in
        place)."""
        return {"format": np.array([ARRAYS_FORMAT]),
                **{name: getattr(self, name) for name in _FIELDS}}

    @staticmethod
    def from_arrays(arrays: dict[str, np.ndarray]) -> TimeIndex:
        """The index ``to_arrays`` gave ``arrays`` of (ValueError if they do not fit)."""
        if list(arrays.get("format", [])) != [ARRAYS_FORMAT]:
            raise ValueError("time index arrays of another format")
        index = TimeIndex(*(arrays[name] for name in _FIELDS))
        kinds = [(index.base, "S16"), (index.base_counts, np.int64), (index.changed, np.int64),
                 (index.changed_counts, np.int64), (index.tail, "S16"),
                 (index.tail_counts, np.int64)]
        if (any(a.dtype != np.dtype(d) or a.ndim != 1 for a, d in kinds)
                or len(index.base) != len(index.base_counts)
                or len(index.changed) != len(index.changed_counts)
                or len(index.tail) != len(index.tail_counts)):
            raise ValueError("time index arrays of the wrong type or length")
        return index

    def live(self) -> tuple[np.ndarray, np.ndarray]:
        """Every live point, sorted, and its count (O(n): a merge)."""
        counts = self.base_counts.copy()
        counts[self.changed] = self.changed_counts
        keep = counts > 0
        points, counts = self.base[keep], counts[keep]
        at = np.searchsorted(points, self.tail)
        return np.insert(points, at, self.tail), np.insert(counts, at, self.tail_counts)

    def updated(self, keys: np.ndarray, times: np.ndarray, weights: np.ndarray) -> TimeIndex | None:
        """The index after a change given as a weight per point (in any order); None if
        the change would leave a point with fewer than no rows (it does not describe this
        index's side: the caller rebuilds)."""
        points, inverse = np.unique(points_of(keys, times), return_inverse=True)
        delta = np.zeros(len(points), dtype=np.int64)
        np.add.at(delta, inverse, np.asarray(weights, dtype=np.int64))
        at = np.searchsorted(self.base, points)
        in_base = _found(self.base, at, points)
        now = self._count_at(points, at, in_base) + delta
        if (now < 0).any():
            return None
        faults.reached("time_index.update")
        positions = np.concatenate([self.changed, at[in_base]])
        counts = np.concatenate([self.changed_counts, now[in_base]])
        order = np.argsort(positions, kind="stable")
        positions, counts = positions[order], counts[order]
        last = np.append(positions[1:] != positions[:-1], True)[:len(positions)]  # newest
        added, added_counts = points[~in_base], now[~in_base]
        at = np.searchsorted(self.tail, added)
        in_tail = _found(self.tail, at, added)
        tail_counts = self.tail_counts.copy()
        tail_counts[at[in_tail]] = added_counts[in_tail]
        tail = np.insert(self.tail, at[~in_tail], added[~in_tail])
        tail_counts = np.insert(tail_counts, at[~in_tail], added_counts[~in_tail])
        version = TimeIndex(self.base, self.base_counts, positions[last], counts[last],
                            tail[tail_counts > 0], tail_counts[tail_counts > 0])
        pending = len(version.changed) + len(version.tail)
        if pending > max(MERGE_MIN, MERGE_FRACTION * len(self.base)):
            return TimeIndex(*version.live())
        return version

    def count_at(self, points: np.ndarray) -> np.ndarray:
        """The live rows at each of ``points`` (0 where there are none)."""
        at = np.searchsorted(self.base, points)
        return self._count_at(points, at, _found(self.base, at, points))

    def _count_at(self, points: np.ndarray, at: np.ndarray, in_base: np.ndarray) -> np.ndarray:
        """``count_at``, given the points' positions in the base and which are there."""
        counts = np.zeros(len(points), dtype=np.int64)
        counts[in_base] = self.base_counts[at[in_base]]
        where = np.searchsorted(self.changed, at)
        changed = in_base & _found(self.changed, where, at)
        counts[changed] = self.changed_counts[where[changed]]
        at = np.searchsorted(self.tail, points)
        in_tail = _found(self.tail, at, points)
        counts[in_tail] = self.tail_counts[at[in_tail]]
        return counts

    def nearest(
        self, keys: np.ndarray, times: np.ndarray, before: bool, strict: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """For each (key, time), the nearest live time of the same key at or before it
        (``before``) or at or after it (else), excluding the time itself if ``strict``:
        (times, found), the times meaningless where not found."""
        return nearest_in([self], keys, times, before, strict)[0]

    def _nearest(
        self, keys: np.ndarray, queries: np.ndarray, at: np.ndarray, before: bool, side: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """``nearest`` of the points ``queries``, given their positions ``at`` in the base
        (``side`` of the search, one back if ``before``; changed here)."""
        step = -1 if before else 0
        dead, first, last = self._runs
        where = np.searchsorted(dead, at)
        in_run = _found(dead, where, at)  # a dead point: go past its run
        at[in_run] = (first[where[in_run]] - 1) if before else (last[where[in_run]] + 1)
        base_times, in_base = self._at(self.base, at, keys)
        tail_times, in_tail = self._at(
            self.tail, np.searchsorted(self.tail, queries, side=side) + step, keys
        )
        pick = np.maximum if before else np.minimum
        both = pick(base_times, tail_times)
        times = np.where(in_base & in_tail, both, np.where(in_base, base_times, tail_times))
        return times, in_base | in_tail

    def between(self, keys: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """The distinct live points of key ``keys[i]`` with a time in ``[low[i], high[i]]``,
        over all i (sorted)."""
        lows, highs = points_of(keys, low), points_of(keys, high)
        positions = _ranges(np.searchsorted(self.base, lows, side="left"),
                            np.searchsorted(self.base, highs, side="right"))
        dead = self._runs[0]
        positions = positions[~_found(dead, np.searchsorted(dead, positions), positions)]
        added = _ranges(np.searchsorted(self.tail, lows, side="left"),
                        np.searchsorted(self.tail, highs, side="right"))
        return distinct(np.concatenate([self.base[positions], self.tail[added]]))

    @staticmethod
    def _at(sorted_: np.ndarray, at: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The times of ``sorted_`` at positions ``at`` and whether each is there and of
        the key asked for."""
        inside = (at >= 0) & (at < len(sorted_))
        if not len(sorted_):
            return np.zeros(len(keys), dtype=np.int64), inside
        found_keys, found_times = split_points(sorted_[np.where(inside, at, 0)])
        return found_times, inside & (found_keys == keys)

    @property
    def _dead(self) -> np.ndarray:
        return self._runs[0]

    @cached_property
    def _runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The dead base positions, sorted, and for each the first and the last position
        of its run of consecutive dead positions."""
        dead = self.changed[self.changed_counts == 0]
        if not len(dead):
            return dead, dead, dead
        starts = np.append(True, dead[1:] != dead[:-1] + 1)
        ends = np.append(dead[1:] != dead[:-1] + 1, True)
        run = np.cumsum(starts) - 1
        return dead, dead[starts][run], dead[ends][run]


_FIELDS = ("base", "base_counts", "changed", "changed_counts", "tail", "tail_counts")


def nearest_in(
    indexes: Sequence[TimeIndex], keys: np.ndarray, times: np.ndarray, before: bool,
    strict: bool,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``TimeIndex.nearest`` in each of ``indexes`` (versions of one side: a base they
    share is searched once, as its 16 MB per million points are out of cache by then)."""
    queries = points_of(keys, times)
    side = ("left" if strict else "right") if before else ("right" if strict else "left")
    positions: dict[int, np.ndarray] = {}
    found = []
    for index in indexes:
        if id(index.base) not in positions:
            positions[id(index.base)] = np.searchsorted(index.base, queries, side=side) - (
                1 if before else 0)
        found.append(index._nearest(keys, queries, positions[id(index.base)].copy(), before,
                                    side))
    return found
