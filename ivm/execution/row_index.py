"""The live rows of a base table as sorted 64-bit hashes: batch checks in O(change).

A delete must find its row, and a primary key holds at most one live row
(API.md). Checked in SQL, each rule joins the change with the whole trace:
a scan of every row at every epoch (≈10 ms per million rows, ≈0.8 s for a
null-safe 16-column join on TPC-H's 6M lineitems). Here each base table keeps
in memory one *entry* per distinct live row:

* its *key hash*: DuckDB's ``hash`` of the primary key's columns (equal keys,
  as DuckDB compares them, hash alike), or for a table without a key the whole
  row's *exact* hash (``ivm.execution.exact``: values DuckDB calls equal but that
  are not identical, as ``-0.0`` and ``0.0``, hash apart);
* its *row hash*: the whole row's exact hash (without a key: another one, of its
  terms in reverse order, a second fingerprint of the row);
* its live count (copies; always 1 for a keyed table).

Entries are sorted by key hash in three levels, a large *base*, a *middle*
level and a small *tail* (the LSM idea of the traces): a lookup is a binary
search in each (``numpy.searchsorted``), an epoch's update changes counts in
place and rewrites only the tail, the tail is merged into the middle level when
it grows past 1/64 of the base, and the middle level into the base past 1/8 of
it. A merge rewrites the level it lands in, so the base (O(n)) is rewritten once
per 8 merges of the tail: with two levels a 6M-row table rewrote its base every
16 epochs of 6k new rows, ≈1–1.5 s each on the 2-core machine (allocating the new
arrays is most of it). A table of n live rows costs 24·n bytes.

The index is a filter, exact in one direction:

* a change it flags (a delete it cannot find, a key left with two rows, or a
  lookup it cannot resolve because two entries share a key hash) is checked
  again by the exact SQL rule (``ivm.execution.constraints``), which raises the
  error, or passes when the flag came from a hash collision (the index is then
  rebuilt from the trace);
* a change it passes is accepted as it is. That is wrong only if a deleted row
  that is not byte for byte a live row has the same hashes as one: for a keyed
  table, the same key and a row hash equal to that key's live row's (chance 2⁻⁶⁴
  per delete); for a table without a key, both hashes equal to some live row's.

A delete equal to a live row but not identical to it (``-0.0`` for ``0.0``) is
flagged too: the exact path then resolves it to the stored row
(``ivm.execution.constraints.resolve_change``), and the index follows the
resolved change.

It is built from the trace at first use (one GROUP BY over the hashes) and
changed only after the epoch that checked a change commits.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from ivm import faults
from ivm.execution.exact import exact_hash_sql
from ivm.plan.sql import W, column_list
from ivm.schema import TableSchema
from ivm.storage.results import fetch_arrow
from ivm.storage.sorted_search import fences_of, search, uses_fences

KEY_HASH = "__ivm_kh"
ROW_HASH = "__ivm_rh"

LEVEL_MIN_ENTRIES = 65_536
"""A level above the base is merged into the level below it once it holds more than
this many entries…"""
LEVEL_FRACTIONS = (1 / 8, 1 / 64)
"""…and more than this fraction of the base's entries: the middle level's, then the
tail's. Each epoch rewrites the tail (O(tail)); a merge rewrites the level below."""
ARRAYS_FORMAT = 2
"""The layout of ``RowIndex.to_arrays`` (with the hashes' SQL above): bump it when either
changes, so that saved indexes of the old layout are built again instead."""
WRITABLE = frozenset(f"{i}.counts" for i in range(len(LEVEL_FRACTIONS) + 1))
"""The arrays of ``RowIndex.to_arrays`` changed in place (the live counts)."""


def hash_columns_sql(table: TableSchema, alias: str = "") -> str:
    """SQL of ``table``'s key hash and row hash (as ``__ivm_kh``, ``__ivm_rh``) of a row."""
    columns = table.schema.columns
    if table.primary_key:
        key = f"hash({column_list(table.primary_key, alias)})"
        row = exact_hash_sql(columns, alias)
    else:
        key = exact_hash_sql(columns, alias)
        row = exact_hash_sql(columns, alias, reverse=True)
    return f"{key} AS {KEY_HASH}, {row} AS {ROW_HASH}"


@dataclass
class Change:
    """A change as arrays, sorted by key hash then row hash: each row's key hash, row
    hash and weight."""

    keys: np.ndarray
    rows: np.ndarray
    weights: np.ndarray

    @classmethod
    def read(cls, con: duckdb.DuckDBPyConnection, hashed: str) -> Change:
        """The change ``hashed`` (SQL with the hash columns and the weight), sorted."""
        faults.reached("checks.consolidated")
        order = f"ORDER BY {KEY_HASH}, {ROW_HASH}"
        table = fetch_arrow(con, f"SELECT {KEY_HASH}, {ROW_HASH}, {W} FROM ({hashed}) AS h {order}")
        return cls(*_arrays(table))

    def consolidated(self) -> bool:
        """Whether each row appears once with a weight other than 0 (two different rows
        with equal hashes count as one: a needless consolidation, never a wrong answer)."""
        repeated = (self.keys[1:] == self.keys[:-1]) & (self.rows[1:] == self.rows[:-1])
        return not (np.any(repeated) or np.any(self.weights == 0))


_DTYPES = (np.uint64, np.uint64, np.int64)


def _arrays(table: pa.Table) -> tuple[np.ndarray, ...]:
    """The three columns of ``table`` as numpy arrays of the index's types."""
    return tuple(
        np.asarray(table.column(i).to_numpy(), dtype) for i, dtype in enumerate(_DTYPES)
    )


@dataclass(eq=False)
class Level:
    """Entries sorted by key hash: key hashes, row hashes, live counts (0: a tombstone).
    Keys never change in place (counts do): a level with other keys is a new level."""

    keys: np.ndarray
    rows: np.ndarray
    counts: np.ndarray

    @classmethod
    def empty(cls) -> Level:
        """No entries."""
        return cls(*(np.empty(0, dtype) for dtype in _DTYPES))

    def __len__(self) -> int:
        return len(self.keys)

    def live(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The entries with a positive count."""
        kept = self.counts > 0
        return self.keys[kept], self.rows[kept], self.counts[kept]

    @functools.cached_property
    def fences(self) -> np.ndarray:
        """Every 64th key hash, for searches of many keys (``ivm.storage.sorted_search``)."""
        return fences_of(self.keys)

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each key: the position of its first entry, and whether it has none (0),
        one (1) or several (2). One search per key (through the level's fences when there
        are many keys): the lookup is bound by memory latency, so it is done once."""
        fences = self.fences if uses_fences(self.keys, keys) else None
        low = search(self.keys, keys, fences)
        size = len(self.keys)
        inside = low < size
        width = np.zeros(len(keys), np.int64)
        width[inside] = self.keys[low[inside]] == keys[inside]
        more = (width == 1) & (low + 1 < size)
        more[more] = self.keys[low[more] + 1] == keys[more]
        width[more] = 2
        return low, width

    def merged(self, keys: np.ndarray, rows: np.ndarray, counts: np.ndarray) -> Level:
        """This level's live entries with sorted new ones inserted in order: O(entries)."""
        own = self.live()
        at = np.searchsorted(own[0], keys, side="left")
        return Level(*(np.insert(old, at, new) for old, new in zip(own, (keys, rows, counts),
                                                                      strict=True)))


class RowIndex:
    """A base table's live rows as hashes (see the module docstring)."""

    def __init__(self, keyed: bool, base: Level) -> None:
        self.keyed = keyed
        self.levels = [base, *(Level.empty() for _ in LEVEL_FRACTIONS)]
        """The base first, the tail last."""
        self._found: list[tuple[Level, Change, np.ndarray, np.ndarray]] = []

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection, table: TableSchema, trace: str) -> RowIndex:
        """The index of the rows live in ``trace`` (``table``'s trace)."""
        hashed = f"SELECT {hash_columns_sql(table)}, {W} FROM {trace}"
        live = con.sql(
            f"SELECT {KEY_HASH}, {ROW_HASH}, SUM({W})::BIGINT AS {W} FROM ({hashed}) AS h "
            f"GROUP BY {KEY_HASH}, {ROW_HASH} HAVING SUM({W}) > 0 ORDER BY {KEY_HASH}"
        ).to_arrow_table()
        return cls(bool(table.primary_key), Level(*_arrays(live)))

    def __len__(self) -> int:
        return int(sum(level.counts.clip(0).sum() for level in self.levels))

    @property
    def nbytes(self) -> int:
        """The bytes its entries hold, tombstones included (no pass over them)."""
        return sum(a.nbytes for level in self.levels for a in (level.keys, level.rows,
                                                                level.counts))

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The index as named arrays (``from_arrays`` takes them back); ``WRITABLE`` names
        the ones changed in place (the counts)."""
        arrays = {"format": np.array([ARRAYS_FORMAT]), "keyed": np.array([self.keyed])}
        for i, level in enumerate(self.levels):
            arrays.update({f"{i}.keys": level.keys, f"{i}.rows": level.rows,
                           f"{i}.counts": level.counts})
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> RowIndex:
        """The index ``to_arrays`` gave ``arrays`` of (ValueError if they do not fit)."""
        levels_saved = 1 + max((int(n.split(".")[0]) for n in arrays if n[0].isdigit()),
                               default=-1)
        if (list(arrays.get("format", [])) != [ARRAYS_FORMAT]
                or levels_saved != len(LEVEL_FRACTIONS) + 1 or arrays["keyed"].shape != (1,)):
            raise ValueError("row index arrays of another format")
        levels = []
        for i in range(len(LEVEL_FRACTIONS) + 1):
            level = Level(*(arrays[f"{i}.{part}"] for part in ("keys", "rows", "counts")))
            if any(a.dtype != d or a.ndim != 1 or len(a) != len(level.keys)
                   for a, d in zip((level.keys, level.rows, level.counts), _DTYPES, strict=True)):
                raise ValueError("row index arrays of the wrong type or length")
            levels.append(level)
        index = cls(bool(arrays["keyed"][0]), levels[0])
        index.levels = levels
        return index

    def accepts(self, change: Change) -> bool:
        """True when the consolidated ``change`` surely keeps both rules: every delete finds
        enough live copies, and (keyed) no key is left with more than one row. False means
        "check exactly": a rule may be broken, or a lookup met two entries with one key
        hash."""
        faults.reached("checks.index")
        looked_up = self._lookup(change)
        if looked_up is None:
            return False
        copies, key_rows = looked_up
        deletes = change.weights < 0
        if np.any(copies[deletes] < -change.weights[deletes]):
            return False
        if not self.keyed:
            return True
        if not len(change.keys):
            return True
        starts = np.flatnonzero(np.r_[True, change.keys[1:] != change.keys[:-1]])
        net = np.add.reduceat(change.weights, starts)
        return not np.any(key_rows[starts] + net > 1)

    def apply(self, change: Change) -> bool:
        """Apply a change ``accepts`` passed (after its epoch commits). False when the
        index cannot follow it (a key hash shared by two entries): rebuild it then."""
        if not any(len(level) for level in self.levels) and np.all(change.weights > 0):
            # A first load: the change, sorted, is the index. Keys and row hashes are never
            # changed in place (shared, not copied); the counts are.
            self.levels[0] = Level(change.keys, change.rows, change.weights.copy())
            return True
        pending = np.ones(len(change.keys), bool)
        for level in self.levels:
            low, width = self._find(level, change)
            if np.any(width > 1):
                return False
            hit = pending & (width == 1)
            hit[hit] = level.rows[low[hit]] == change.rows[hit]
            np.add.at(level.counts, low[hit], change.weights[hit])
            pending &= ~hit
        self._found.clear()
        faults.reached("row_index.applied")
        if np.any(change.weights[pending] <= 0):
            return False
        self.levels[-1] = self.levels[-1].merged(
            change.keys[pending], change.rows[pending], change.weights[pending]
        )
        for above in range(len(self.levels) - 1, 0, -1):  # the tail first
            limit = LEVEL_FRACTIONS[above - 1] * len(self.levels[0])
            if len(self.levels[above]) > max(LEVEL_MIN_ENTRIES, limit):
                self.levels[above - 1] = self.levels[above - 1].merged(
                    *self.levels[above].live()
                )
                self.levels[above] = Level.empty()
        return True

    def _find(self, level: Level, change: Change) -> tuple[np.ndarray, np.ndarray]:
        """``level.find(change.keys)``, remembered from ``accepts`` for ``apply``."""
        for seen, looked, low, width in self._found:
            if seen is level and looked is change:
                return low, width
        low, width = level.find(change.keys)
        self._found.append((level, change, low, width))
        del self._found[: -len(self.levels)]
        return low, width

    def _lookup(self, change: Change) -> tuple[np.ndarray, np.ndarray] | None:
        """Per change row: live copies of that exact row, and live rows of its key;
        None when some lookup is ambiguous (two entries share a key hash)."""
        copies = np.zeros(len(change.keys), np.int64)
        key_rows = np.zeros(len(change.keys), np.int64)
        for level in self.levels:
            if not len(level):  # nothing there (a first load: every level)
                continue
            low, width = self._find(level, change)
            if np.any(width > 1):
                return None
            hit = width == 1
            at = low[hit]
            counts = level.counts[at]
            key_rows[hit] += counts
            copies[hit] += np.where(level.rows[at] == change.rows[hit], counts, 0)
        return copies, key_rows
