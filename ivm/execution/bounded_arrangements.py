"""Arrangements within a memory budget: built and merged into only while they fit.

An embedded session's arrangements (``ivm.execution.arrangements``) hold traces in
memory. ``BoundedArrangements`` holds them to the session's ``MemoryBudget``
(``ivm.storage.memory``): before a lookup builds an arrangement (or builds it again with
more columns) the arrangement's bytes are estimated from its table (one statement: a
count and the lengths of its variable-width columns), and it is built only if the
state the budget counts stays within its share. Otherwise, and whenever merging the
rows committed since its last read (or holding them until then) takes the state past
that share, the arrangement is dropped and its reads go to the table: the rows at the
keys, consolidated as the arrangement would give them, in one statement DuckDB runs
within its own memory limit (spilling where it must). A view whose state outgrows the
budget gets slower (a scan per read); the process is never killed for it. An
arrangement declined is estimated again only once the state has as much room as it
needed. ``lookup_hashed`` (the in-memory GROUP BY step's lookups) answers None without
an arrangement, and its reader computes in SQL instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import pyarrow as pa

from ivm.errors import ExecutionError
from ivm.execution.arrangements import Arrangements, _selected, _Unmerged
from ivm.operators.base import At
from ivm.operators.reads import read_sql
from ivm.plan.sql import consolidate_sql
from ivm.storage.memory import MemoryBudget, estimate_bytes

HASHES_AND_WEIGHT = 24
"""Bytes an arrangement adds to each row's values: its key hash, row hash and weight."""


class BoundedArrangements(Arrangements):
    """``Arrangements`` held to a memory budget (see the module docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, budget: MemoryBudget) -> None:
        super().__init__(con)
        self.budget = budget
        self._declined: dict[tuple[str, tuple[str, ...]], int] = {}  # estimated bytes

    def lookup(
        self, table: str, at: At, live: bool, reader: str = "",
        reads: Sequence[str] | None = None,
    ) -> tuple[pa.Table, bool]:
        """As ``Arrangements.lookup``; read from the table when the budget has no room."""
        wanted = list(dict.fromkeys([*at.columns, *reads])) if reads is not None else None
        if not self._affordable(table, at.columns, wanted):
            return self._read_through(table, at, live, wanted, reads), True
        grows = self._grows(table, at.columns, wanted)
        found = super().lookup(table, at, live, reader, reads)
        if grows:
            self._shed(table, at.columns)
        return found

    def lookup_hashed(
        self, table: str, columns: tuple[str, ...], keys: pa.Table, hashes: np.ndarray,
        reader: str = "",
    ) -> tuple[pa.Table, np.ndarray] | None:
        """As ``Arrangements.lookup_hashed``; None when the budget has no room."""
        if not self._affordable(table, columns, None):
            return None
        grows = self._grows(table, columns, None)
        found = super().lookup_hashed(table, columns, keys, hashes, reader)
        if grows:
            self._shed(table, columns)
        return found

    def _hold(self, table: str, key: tuple[str, ...], rows: _Unmerged) -> None:
        """As ``Arrangements._hold``; the arrangement is dropped if the state is over."""
        super()._hold(table, key, rows)
        self._shed(table, key)

    def nbytes(self) -> int:
        """The bytes every arrangement holds, with the rows held for its next read."""
        held = sum(a.nbytes for by_key in self._arranged.values() for a in by_key.values())
        return held + sum(r.nbytes for rows in self._unmerged.values() for r in rows)

    def forget(self, table: str) -> None:
        """As ``Arrangements.forget``, and ``table``'s declined arrangements forgotten."""
        super().forget(table)
        for key in [k for k in self._declined if k[0] == table]:
            del self._declined[key]

    def clear(self) -> None:
        """As ``Arrangements.clear``; what was declined is estimated again."""
        super().clear()
        self._declined.clear()

    # -- the budget --------------------------------------------------------------------------

    def _affordable(
        self, table: str, key: tuple[str, ...], wanted: Sequence[str] | None
    ) -> bool:
        """Whether a lookup of ``table`` by ``key`` for ``wanted`` (None: every column) may
        go to its arrangement: it is held with those columns already, or building it
        keeps the state within the budget's share."""
        names = [n for n, _ in self.columns(table)]
        held = self._arranged.get(table, {}).get(key)
        if held is not None and set(wanted or names) <= set(held.schema.names):
            return True
        if held is not None:  # built again with the columns it holds and those wanted
            wanted = [*held.schema.names, *(wanted or names)]
        if wanted is not None:
            names = [n for n in names if n in set(wanted) | set(key)]
        declined = self._declined.get((table, key))
        if declined is not None and not self.budget.admits(declined):
            return False
        try:
            estimate = estimate_bytes(
                self.con, table, self._typed(table, names), per_row=HASHES_AND_WEIGHT
            )
        except duckdb.Error as error:
            raise ExecutionError(f"reading state failed: {error}") from error
        if held is not None:
            estimate -= held.nbytes  # dropped as the new one is built
        if self.budget.admits(estimate):
            self._declined.pop((table, key), None)
            return True
        self._declined[(table, key)] = estimate
        return False

    def fit(self) -> None:
        """Drop arrangements, the largest first, until the state is within the budget's
        share (before an epoch: the limit may have fallen, or indexes grown)."""
        while self.budget.over():
            sizes = [(a.nbytes, t, k) for t, by in self._arranged.items() for k, a in by.items()]
            if not sizes:
                return
            _, table, key = max(sizes)
            self._drop(table, key)

    def _grows(self, table: str, key: tuple[str, ...], wanted: Sequence[str] | None) -> bool:
        """Whether a lookup will build ``table``'s arrangement by ``key`` or merge rows
        into it (else what it holds stays as it is: no need to look at the budget)."""
        held = self._arranged.get(table, {}).get(key)
        names = wanted or [n for n, _ in self.columns(table)]
        if held is None or not set(names) <= set(held.schema.names):
            return True
        return bool(self._unmerged.get((table, key)))

    def _shed(self, table: str, key: tuple[str, ...]) -> None:
        """Drop ``table``'s arrangement by ``key`` (and the rows held for it) if the state
        is over the budget's share: its reads go to the table from now on."""
        if self.budget.over():
            self._drop(table, key)

    def _drop(self, table: str, key: tuple[str, ...]) -> None:
        """Drop ``table``'s arrangement by ``key``, remembering the bytes it held."""
        by_key = self._arranged.get(table, {})
        arrangement = by_key.pop(key, None)
        if arrangement is None:
            return
        held = self._unmerged.pop((table, key), [])
        self._declined[(table, key)] = arrangement.nbytes + sum(r.values.nbytes for r in held)
        if not by_key:
            self._arranged.pop(table, None)

    def _read_through(
        self, table: str, at: At, live: bool, wanted: Sequence[str] | None,
        reads: Sequence[str] | None,
    ) -> pa.Table:
        """What ``lookup`` returns, read from the table: its rows at the keys (compared
        by value in SQL, so exactly the keys' rows), consolidated on the columns an
        arrangement would hold."""
        names = list(wanted) if wanted is not None else [n for n, _ in self.columns(table)]
        rows = read_sql(f"SELECT * FROM {table}", names, at)
        with self.exporting():
            found = self._query(consolidate_sql(rows, names, positive_only=live))
        return _selected(found, reads)


__all__ = ["BoundedArrangements"]
