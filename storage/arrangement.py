"""Arrangements: a trace's rows in memory, sorted by a 64-bit hash of a key, in levels.

A trace's durable copy is a DuckDB table, which no join can search by key: reading
the rows of a change's keys scans the whole table. An ``Arrangement`` is the trace's
*working form* (differential dataflow's arrangement, Feldera's spine): the same rows
and weights as immutable *batches* of Arrow columns, each sorted by the *key hash*
(DuckDB's ``hash`` of the key columns), so the rows of a set of keys are one binary
search per batch and one Arrow ``take``: O(|keys| · log n + rows found), never a scan.

Each row also carries its *row hash* (DuckDB's ``hash`` of all its columns): equal rows
have equal (key hash, row hash), which is how batches are consolidated (weights of
equal rows summed, zeros dropped) without comparing values. Two different rows with
both hashes equal would be taken for one (chance about n²·2⁻¹²⁸ for n rows sharing a
key hash): the same risk the row index of base tables takes.

A key hash may be shared by different keys (a collision): ``lookup`` returns every row
of the hashes asked for, a superset of the keys' rows, and the reader filters by the
key's values (``ivm.execution`` does, in the statement that reads the rows).

**The spine.** Batches are kept largest (oldest) first; each insert of an epoch's rows
adds a batch at the end, then while the last batch holds at least half as many entries
as the one before it, the two are merged into one (consolidated): batch sizes at least
double going left, so there are at most log₂ n + 1 batches, and each entry is rewritten
O(log n) times over its life (differential's and Feldera's spines merge batches of
similar size the same way). A merge is O(entries merged); zeros are dropped, so the
arrangement holds about its live rows plus the recent history not yet merged away.

Batches are immutable: a lookup that returned rows keeps them valid whatever is
inserted later. An arrangement changes only when its owner inserts (after an epoch
commits), and can always be rebuilt from its durable copy.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ivm import faults
from ivm.storage.distinct import distinct, distinct_of_sorted
from ivm.storage.sorted_search import equal_ranges, fences_of, uses_fences
from ivm.storage.sqltext import WEIGHT

MERGE_RATIO = 2
"""A batch is merged into the one before it once that one holds fewer than ``MERGE_RATIO``
times its entries."""


@dataclass(frozen=True, eq=False)
class Batch:
    """Rows sorted by key hash: their values (Arrow, without the weight), key hashes,
    row hashes and weights (numpy). Never changed once built."""

    rows: pa.Table
    keys: np.ndarray
    hashes: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)

    @functools.cached_property
    def nbytes(self) -> int:
        """Bytes held by the batch's arrays (an immutable batch's: counted once)."""
        return self.rows.nbytes + self.keys.nbytes + self.hashes.nbytes + self.weights.nbytes

    @functools.cached_property
    def fences(self) -> np.ndarray:
        """Every 64th key hash, for searches of many keys (``ivm.storage.sorted_search``)."""
        return fences_of(self.keys)

    def find(self, wanted: np.ndarray) -> np.ndarray:
        """Positions of the entries whose key hash is in ``wanted`` (sorted, unique)."""
        fences = self.fences if uses_fences(self.keys, wanted) else None
        return ranges(*equal_ranges(self.keys, wanted, fences))


def ranges(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The positions ``low[i] <= p < high[i]`` of every range, in order, as one array."""
    lengths = high - low
    hit = lengths > 0
    low, lengths = low[hit], lengths[hit]
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, np.int64)
    # Each position is its range's start plus its rank within the range.
    starts = np.repeat(low - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return starts + np.arange(total, dtype=np.int64)


def pair_ids(keys: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """One 64-bit number per (key hash, row hash) pair, well mixed (equal pairs, equal
    numbers; unequal pairs almost always unequal, which callers check exactly)."""
    with np.errstate(over="ignore"):
        mixed = keys * np.uint64(0x9E3779B97F4A7C15) + hashes
        mixed ^= mixed >> np.uint64(31)
        mixed *= np.uint64(0xBF58476D1CE4E5B9)
        mixed ^= mixed >> np.uint64(29)
    return mixed


def consolidated(
    rows: pa.Table, keys: np.ndarray, hashes: np.ndarray, weights: np.ndarray,
    positive_only: bool = False,
) -> Batch:
    """One batch of ``rows``: sorted by key hash, equal rows' weights summed, zeros (or,
    ``positive_only``, non-positive sums) dropped.

    Equal rows are found by sorting one mixed number per (key hash, row hash) pair
    (``pair_ids``), one sort of random 64-bit numbers instead of a lexicographic sort of
    two; a group of equal numbers whose pairs differ (a collision of the mix) sends the
    batch to the lexicographic sort."""
    if len(keys) == 0:
        return Batch(rows.slice(0, 0), keys, hashes, weights)
    ids = pair_ids(keys, hashes)
    order = np.argsort(ids)
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    if len(starts) < len(order):  # some rows share a number: are their pairs equal?
        first = np.repeat(order[starts], np.diff(np.r_[starts, len(order)]))
        if not (np.array_equal(keys[order], keys[first])
                and np.array_equal(hashes[order], hashes[first])):
            return _consolidated_lexically(rows, keys, hashes, weights, positive_only)
    sums = np.add.reduceat(weights[order], starts)
    kept = sums > 0 if positive_only else sums != 0
    firsts, sums = order[starts[kept]], sums[kept]
    by_key = np.argsort(keys[firsts], kind="stable")
    pick, sums = firsts[by_key], sums[by_key]
    if len(pick) == len(keys) and np.array_equal(pick, np.arange(len(pick))):
        return Batch(rows, keys, hashes, sums)  # already consolidated and sorted
    return Batch(rows.take(pick).combine_chunks(), keys[pick], hashes[pick], sums)


def _consolidated_lexically(
    rows: pa.Table, keys: np.ndarray, hashes: np.ndarray, weights: np.ndarray,
    positive_only: bool,
) -> Batch:
    """``consolidated`` by a lexicographic sort on (key hash, row hash): exact whatever
    the pairs' mixed numbers (the rare case where two pairs' numbers collide)."""
    order = np.lexsort((hashes, keys))
    keys, hashes, weights = keys[order], hashes[order], weights[order]
    starts = np.flatnonzero(
        np.r_[True, (keys[1:] != keys[:-1]) | (hashes[1:] != hashes[:-1])]
    )
    sums = np.add.reduceat(weights, starts)
    kept = sums > 0 if positive_only else sums != 0
    first = starts[kept]
    taken = rows.take(order[first]).combine_chunks()
    return Batch(taken, keys[first], hashes[first], sums[kept])


class Arrangement:
    """A trace's rows by key hash, in a spine of batches (see the module docstring)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        """The rows' columns (the weight excluded)."""
        self.batches: list[Batch] = []
        """Largest (oldest) first."""

    @classmethod
    def of(
        cls, rows: pa.Table, keys: np.ndarray, hashes: np.ndarray, weights: np.ndarray
    ) -> Arrangement:
        """An arrangement holding ``rows`` (any order, not necessarily consolidated)."""
        arrangement = cls(rows.schema)
        arrangement.insert(rows, keys, hashes, weights)
        return arrangement

    @classmethod
    def of_consolidated(
        cls, rows: pa.Table, keys: np.ndarray, hashes: np.ndarray, weights: np.ndarray
    ) -> Arrangement:
        """An arrangement holding ``rows``, which are each there once (no two with equal
        key and row hashes) with nonzero weights: sorted here only if they are not yet
        in key hash order (a build from a query that sorted them skips the sort)."""
        keys = np.asarray(keys, np.uint64)
        if len(keys) > 1 and not np.all(keys[1:] >= keys[:-1]):
            order = np.argsort(keys, kind="stable")
            rows, keys = rows.take(order), keys[order]
            hashes, weights = np.asarray(hashes)[order], np.asarray(weights)[order]
        arrangement = cls(rows.schema)
        if len(keys):
            arrangement.batches.append(Batch(
                rows.combine_chunks(), keys, np.asarray(hashes, np.uint64),
                np.asarray(weights, np.int64),
            ))
        return arrangement

    @classmethod
    def of_sorted(
        cls, rows: pa.Table, keys: np.ndarray, hashes: np.ndarray, weights: np.ndarray
    ) -> Arrangement:
        """An arrangement holding ``rows``, given sorted by (key hash, row hash) but not
        consolidated (a trace read as it is stored, sorted by DuckDB): equal rows are
        neighbours, so consolidating is one pass summing each run of equal hash pairs
        (zeros dropped), never a sort here. Rows not so sorted are sorted first."""
        keys = np.asarray(keys, np.uint64)
        hashes = np.asarray(hashes, np.uint64)
        weights = np.asarray(weights, np.int64)
        if len(keys) == 0:
            return cls(rows.schema)
        if not (
            np.all(keys[1:] >= keys[:-1])
            and np.all((keys[1:] > keys[:-1]) | (hashes[1:] >= hashes[:-1]))
        ):
            return cls.of(rows, keys, hashes, weights)
        starts = np.flatnonzero(
            np.r_[True, (keys[1:] != keys[:-1]) | (hashes[1:] != hashes[:-1])]
        )
        if len(starts) == len(keys) and np.all(weights != 0):
            return cls.of_consolidated(rows, keys, hashes, weights)
        sums = np.add.reduceat(weights, starts)
        kept = sums != 0
        first = starts[kept]
        return cls.of_consolidated(rows.take(first), keys[first], hashes[first], sums[kept])

    def __len__(self) -> int:
        """Entries held (rows with a weight, over every batch)."""
        return sum(len(b) for b in self.batches)

    @property
    def nbytes(self) -> int:
        """Bytes held by every batch's arrays."""
        return sum(b.nbytes for b in self.batches)

    def insert(
        self, rows: pa.Table, keys: np.ndarray, hashes: np.ndarray, weights: np.ndarray
    ) -> None:
        """Add ``rows`` (columns as ``schema``; ``keys``, ``hashes``: their key and row
        hashes; ``weights``: their weights) as a new batch, then merge batches of
        similar size."""
        rows = rows.select(self.schema.names)
        if rows.schema != self.schema:
            rows = rows.cast(self.schema)
        batch = consolidated(
            rows,
            np.asarray(keys, np.uint64),
            np.asarray(hashes, np.uint64),
            np.asarray(weights, np.int64),
        )
        if len(batch):
            self.batches.append(batch)
        while len(self.batches) > 1 and (
            len(self.batches[-2]) < MERGE_RATIO * len(self.batches[-1])
        ):
            faults.reached("arrangement.merge")
            last = self.batches.pop()
            self.batches[-1] = merged([self.batches[-1], last])

    def lookup(self, wanted: np.ndarray, positive_only: bool = False) -> pa.Table:
        """The rows whose key hash is in ``wanted`` (any order, duplicates allowed), with
        their weights as ``__w``, consolidated (``positive_only``: only rows whose weight
        is positive). A superset of the rows of the keys hashed: filter by value."""
        batch = self.lookup_batch(wanted, positive_only)
        return with_weights(batch.rows, batch.weights)

    def lookup_batch(self, wanted: np.ndarray, positive_only: bool = False) -> Batch:
        """As ``lookup``, as a batch: the rows with their key hashes, so a reader can tell
        which key each row was found by."""
        wanted = distinct(np.asarray(wanted, np.uint64))
        parts = []
        for batch in self.batches:
            at = batch.find(wanted)
            if len(at):
                parts.append((batch, at))
        return self._gathered(parts, positive_only)

    def contents(self, positive_only: bool = False) -> pa.Table:
        """Every row, consolidated, with its weight as ``__w``."""
        batch = self._gathered([(b, None) for b in self.batches], positive_only)
        return with_weights(batch.rows, batch.weights)

    def _gathered(
        self, parts: Sequence[tuple[Batch, np.ndarray | None]], positive_only: bool
    ) -> Batch:
        """The rows of ``parts`` (a batch and positions in it, None: all), consolidated."""
        if not parts:
            empty = np.empty(0, np.uint64)
            return Batch(self.schema.empty_table(), empty, empty, np.empty(0, np.int64))
        if len(parts) == 1:
            batch, at = parts[0]
            if at is not None:
                batch = Batch(
                    batch.rows.take(at), batch.keys[at], batch.hashes[at], batch.weights[at]
                )
            if positive_only and np.any(batch.weights <= 0):
                kept = np.flatnonzero(batch.weights > 0)  # a batch holds each row once
                return Batch(batch.rows.take(kept), batch.keys[kept], batch.hashes[kept],
                             batch.weights[kept])
            return batch
        rows = pa.concat_tables(
            [b.rows if at is None else b.rows.take(at) for b, at in parts]
        )
        pick = [(b, slice(None) if at is None else at) for b, at in parts]
        return consolidated(
            rows,
            np.concatenate([b.keys[at] for b, at in pick]),
            np.concatenate([b.hashes[at] for b, at in pick]),
            np.concatenate([b.weights[at] for b, at in pick]),
            positive_only=positive_only,
        )


def merged(batches: Sequence[Batch]) -> Batch:
    """One consolidated batch holding ``batches``' entries (each batch consolidated)."""
    if len(batches) == 2:
        return _merged_pair(batches[0], batches[1])
    return _concatenated(batches)


def _concatenated(batches: Sequence[Batch]) -> Batch:
    """``merged`` by consolidating the batches' concatenation."""
    return consolidated(
        pa.concat_tables([b.rows for b in batches]),
        np.concatenate([b.keys for b in batches]),
        np.concatenate([b.hashes for b in batches]),
        np.concatenate([b.weights for b in batches]),
    )


def _merged_pair(old: Batch, new: Batch) -> Batch:
    """``old`` and ``new`` (each consolidated and sorted) merged in time linear in their
    entries: ``new``'s rows found among ``old``'s rows of the same key hashes (one sort
    of ``new``'s pair numbers, one search), their weights added to ``old``'s, zeros
    dropped, then one stable sort by key hash, which for two sorted runs is a merge."""
    if len(new) == 0 or len(old) == 0:
        return new if len(old) == 0 else old
    candidates = old.find(distinct_of_sorted(new.keys))
    new_ids = pair_ids(new.keys, new.hashes)
    by_id = np.argsort(new_ids)
    sorted_ids = new_ids[by_id]
    if np.any(sorted_ids[1:] == sorted_ids[:-1]):
        return _concatenated([old, new])  # two of new's pairs share a number: rare
    old_ids = pair_ids(old.keys[candidates], old.hashes[candidates])
    at = np.minimum(np.searchsorted(sorted_ids, old_ids), len(sorted_ids) - 1)
    hit = sorted_ids[at] == old_ids
    in_old, in_new = candidates[hit], by_id[at[hit]]
    if not (np.array_equal(old.keys[in_old], new.keys[in_new])
            and np.array_equal(old.hashes[in_old], new.hashes[in_new])):
        return _concatenated([old, new])  # a pair number shared by unequal pairs: rare
    weights = old.weights.copy()
    weights[in_old] += new.weights[in_new]
    fresh = np.ones(len(new), bool)
    fresh[in_new] = False
    picked = np.concatenate(
        [np.flatnonzero(weights != 0), len(old) + np.flatnonzero(fresh)]
    )
    keys = np.concatenate([old.keys, new.keys])[picked]
    order = np.argsort(keys, kind="stable")
    picked = picked[order]
    return Batch(
        pa.concat_tables([old.rows, new.rows]).take(picked).combine_chunks(),
        keys[order],
        np.concatenate([old.hashes, new.hashes])[picked],
        np.concatenate([weights, new.weights])[picked],
    )


def with_weights(rows: pa.Table, weights: np.ndarray) -> pa.Table:
    """``rows`` with ``weights`` appended as the weight column ``__w``."""
    return rows.append_column(WEIGHT, pa.array(weights, pa.int64()))
