"""The embedded session's arrangements: its traces kept in memory, searchable by key.

Every trace is a DuckDB table (its durable copy). The first time an operator reads a
trace at some keys (``Run.read(…, at=…)``, ``Run.source_integral(…, at=…)``), the
trace is *arranged* by those key columns: its live rows are loaded, once, into an
``ivm.storage.arrangement.Arrangement`` sorted by the key's hash, and from then on
every read at keys is a binary search and an Arrow ``take`` over it, never a scan of
the table. One arrangement per (trace, key columns), shared by every operator and
every view that reads the trace by that key. It holds the columns its readers use
(``At.needed``: a join reading lineitem by l_orderkey for three of its sixteen
columns arranges those three, a quarter of the memory and of the time to build);
a reader needing more rebuilds it with the union of the columns.

An arranged trace is kept in step with its table: rows appended to the table during
an epoch are read into Arrow with their hashes first (one statement), inserted into
the table from there, and are kept for its arrangements once the epoch commits
(``committed``), merged into each at its next read (an arrangement nobody reads is
dropped rather than merged into forever); a rolled-back epoch leaves the arrangements
as they were (``rolled_back``). Whatever is dropped or in doubt is forgotten and
rebuilt from the table at its next read.

Hashes are DuckDB's ``hash`` of the key's columns (and, for consolidation, of the whole
row), computed by DuckDB on both sides, the keys looked up cast to the trace columns'
types first, so equal values hash alike whatever type a key came with. A read returns
the rows of the hashes asked for, which may include another key's rows (a collision):
they are compared with the keys by value in Arrow (``rows_at_keys``) where Arrow's
equality is DuckDB's, else by the statement that reads them (``ivm.operators.reads``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from ivm import faults
from ivm.errors import ExecutionError
from ivm.execution.exact import row_hash_sql
from ivm.execution.key_match import PROBE_HASH, key_matches, rows_at_keys
from ivm.operators.base import At
from ivm.plan.sql import W
from ivm.schema import quote
from ivm.storage.arrangement import Arrangement, with_weights
from ivm.storage.results import fetch_arrow, written
from ivm.storage.sqltext import WEIGHT, key_hash_sql

ROW_HASH = "__ivm_rh"
UNMERGED_LIMIT = 100_000
"""Committed rows an unread arrangement may hold unmerged before it is dropped (and
never fewer than its own entries)."""


def key_hash(index: int) -> str:
    """Column name of the ``index``-th arrangement's key hash in an append's rows."""
    return f"__ivm_kh{index}"


def row_hash(index: int) -> str:
    """Column name of the ``index``-th arrangement's row hash (of the columns it holds)
    in an append's rows."""
    return f"__ivm_rh{index}"


def _selected(rows: pa.Table, names: Sequence[str] | None) -> pa.Table:
    """``rows``' columns ``names`` (all when None) and the weight."""
    if names is None or list(rows.column_names) == [*names, WEIGHT]:
        return rows
    return rows.select([*names, WEIGHT])


@dataclass(frozen=True)
class ArrangementSize:
    """One arrangement as ``explain`` shows it."""

    table: str
    key: tuple[str, ...]
    entries: int
    bytes: int
    readers: tuple[str, ...]
    """The views that read the trace through it (one arrangement, shared)."""
    columns: tuple[str, ...] = ()
    """The trace's columns it holds (its readers use no others)."""
    of_columns: int = 0
    """How many columns the trace has."""


@dataclass
class _Pending:
    """Rows appended to an arranged trace this epoch: their values and hashes (the row
    hash, and the key hash of each key in ``keys``, in order)."""

    table: str
    keys: list[tuple[str, ...]]
    rows: pa.Table
    columns: list[tuple[str, ...]]
    """The columns each key's arrangement held when the rows were hashed."""


@dataclass(frozen=True)
class _Unmerged:
    """Committed rows not yet merged into an arrangement: values and hashes (numpy)."""

    values: pa.Table
    keys: np.ndarray
    hashes: np.ndarray
    weights: np.ndarray

    @functools.cached_property
    def nbytes(self) -> int:
        """Bytes its values hold (counted once: they never change)."""
        return self.values.nbytes


class Arrangements:
    """The arrangements of one embedded session's traces (see the module docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._arranged: dict[str, dict[tuple[str, ...], Arrangement]] = {}
        self._columns: dict[str, list[tuple[str, str]]] = {}
        self._pending: list[_Pending] = []
        self._unmerged: dict[tuple[str, tuple[str, ...]], list[_Unmerged]] = {}
        self._exporting = False
        self._reset_owed = False
        self._readers: dict[tuple[str, tuple[str, ...]], set[str]] = {}

    # -- reading -----------------------------------------------------------------------------

    def lookup(
        self, table: str, at: At, live: bool, reader: str = "",
        reads: Sequence[str] | None = None,
    ) -> tuple[pa.Table, bool]:
        """The rows of trace ``table`` at ``at``'s keys, consolidated, with their weights
        (``live``: positive ones only), and whether they are exactly the keys' rows. When
        not (keys of a type whose equality Arrow does not share with DuckDB, or two keys
        sharing a hash), they are the rows of the keys' hashes, a superset the reader
        filters by value. ``reader``: the view reading (``readers`` reports who shares an
        arrangement); ``reads``: the columns it reads (None: all), which the rows have,
        consolidated as that projection of the trace."""
        wanted = list(dict.fromkeys([*at.columns, *reads])) if reads is not None else None
        arrangement = self._arrangement(table, at.columns, wanted)
        self._readers.setdefault((table, at.columns), set()).add(reader)
        types = dict(self.columns(table))
        names = [f"__k{i}" for i in range(len(at.columns))]
        cast = [f"TRY_CAST(__k.{quote(n)} AS {types[c]}) AS {quote(c)}"
                for n, c in zip(names, at.columns, strict=True)]
        with self.exporting():
            probes = self._query(
                f"SELECT DISTINCT *, {key_hash_sql(at.columns, '__c')} AS {PROBE_HASH} FROM ("
                f"SELECT {', '.join(cast)} FROM ({at.keys}) AS __k({', '.join(names)})) AS __c",
                small=True,
            )
        found = arrangement.lookup_batch(probes.column(PROBE_HASH).to_numpy(), live)
        exact = rows_at_keys(found, probes, at.columns, at.nulls)
        if exact is not None:
            return _selected(exact, reads), True
        return _selected(with_weights(found.rows, found.weights), reads), False

    def lookup_hashed(
        self, table: str, columns: tuple[str, ...], keys: pa.Table, hashes: np.ndarray,
        reader: str = "",
    ) -> tuple[pa.Table, np.ndarray] | None:
        """The live rows of trace ``table`` (every column, with its weight) whose
        ``columns`` equal a row of ``keys`` (NULL equal to NULL), and for each the row of
        ``keys`` it is at. ``hashes``: the keys' hashes, as ``key_hash_sql`` computes them
        over the keys typed as the trace's columns; no statement runs. None when Arrow
        cannot compare the keys as DuckDB does, or two keys share a hash."""
        arrangement = self._arrangement(table, columns)
        self._readers.setdefault((table, columns), set()).add(reader)
        found = arrangement.lookup_batch(hashes, True)
        matched = key_matches(found, keys, hashes, columns, nulls=True)
        if matched is None:
            return None
        kept, at = matched
        return with_weights(found.rows.take(kept), found.weights[kept]), at

    def columns(self, table: str) -> list[tuple[str, str]]:
        """``table``'s columns (the weight excluded): (name, DuckDB type)."""
        if table not in self._columns:
            rows = self.con.execute(f"DESCRIBE {table}").fetchall()
            self._columns[table] = [(r[0], r[1]) for r in rows if r[0] != WEIGHT]
        return self._columns[table]

    def _typed(self, table: str, names: Sequence[str]) -> list[tuple[str, str]]:
        """``names``, columns of ``table``, with their types."""
        types = dict(self.columns(table))
        return [(name, types[name]) for name in names]

    def _arrangement(
        self, table: str, key: tuple[str, ...], wanted: Sequence[str] | None = None
    ) -> Arrangement:
        """``table``'s arrangement by ``key``, holding at least the columns ``wanted``
        (None: all), built from the table at first use, and built again, holding the
        columns it held and those, when a reader wants columns it does not hold."""
        by_key = self._arranged.setdefault(table, {})
        names = [n for n, _ in self.columns(table)]
        held_now = by_key.get(key)
        if held_now is not None and not set(wanted or names) <= set(held_now.schema.names):
            wanted = [*held_now.schema.names, *(wanted or names)]
            del by_key[key]
            self._unmerged.pop((table, key), None)
        held = self._unmerged.pop((table, key), [])
        if key in by_key and held:  # the rows committed since its last read, merged now
            by_key[key].insert(
                pa.concat_tables([r.values for r in held]),
                np.concatenate([r.keys for r in held]),
                np.concatenate([r.hashes for r in held]),
                np.concatenate([r.weights for r in held]),
            )
        if key not in by_key:
            if wanted is not None:  # the table's columns the readers use, in its order
                names = [n for n in names if n in set(wanted) | set(key)]
            cols = ", ".join(quote(n) for n in names)
            with self.exporting():
                # Read as stored, sorted by DuckDB: consolidating sorted rows is one pass
                # (a GROUP BY of every column costs about twice the sort).
                rows = self._query(
                    f"SELECT {cols}, {key_hash_sql(key)} AS {key_hash(0)}, "
                    f"{row_hash_sql(self._typed(table, names))} AS {ROW_HASH}, {W} "
                    f"FROM {table} ORDER BY {key_hash(0)}, {ROW_HASH}"
                )
            by_key[key] = Arrangement.of_sorted(
                rows.select(names),
                rows.column(key_hash(0)).to_numpy(),
                rows.column(ROW_HASH).to_numpy(),
                rows.column(WEIGHT).to_numpy(),
            )
        return by_key[key]

    # -- writing -----------------------------------------------------------------------------

    @contextmanager
    def exporting(self) -> Iterator[None]:
        """Within the block, rows DuckDB hands to Arrow keep their exact types (HUGEINT,
        UUID, TIME WITH TIME ZONE… as DuckDB's Arrow extension types, not DOUBLE or
        VARCHAR), so arranged rows read back into DuckDB are the rows stored. Appends to
        arranged traces must run inside it. The setting is this connection's alone
        (``SET SESSION``): a reader's cursor meanwhile keeps the ordinary types."""
        if self._exporting:
            yield
            return
        self.con.execute("SET SESSION arrow_lossless_conversion = true").fetchall()
        self._exporting = True
        try:
            yield
        finally:
            self._exporting = False
            try:
                self.con.execute("RESET SESSION arrow_lossless_conversion").fetchall()
            except duckdb.Error:  # inside a failed transaction: once it is rolled back
                self._reset_owed = True

    def append(self, table: str, rows: str) -> int:
        """Append ``rows`` (SQL, columns in ``table``'s order, then the weight) to trace
        ``table``; returns the rows written. An arranged trace's rows are kept, with
        their hashes, for its arrangements once the epoch commits (call it inside
        ``exporting``)."""
        faults.reached("trace.append")
        if not self._arranged.get(table):
            count = written(self.con, f"INSERT INTO {table} {rows}")
            faults.reached("trace.appended")
            return count
        columns = self.columns(table)
        names = [n for n, _ in columns]
        keys = list(self._arranged[table])
        held = [tuple(self._arranged[table][k].schema.names) for k in keys]
        aliases = ", ".join([*(quote(n) for n in names), W])
        # Typed as the table types them, so a row hashes as it will when read back.
        typed = ", ".join(
            [*(f"CAST({quote(n)} AS {t}) AS {quote(n)}" for n, t in columns),
             f"CAST({W} AS BIGINT) AS {W}"]
        )
        hashes = [f"{key_hash_sql(k)} AS {key_hash(i)}" for i, k in enumerate(keys)]
        hashes += [
            f"{row_hash_sql(self._typed(table, c))} AS {row_hash(i)}" for i, c in enumerate(held)
        ]
        assert self._exporting, "appends to arranged traces run inside exporting()"
        # One statement: the rows go into the table and come back, as stored, with their
        # hashes (DuckDB's RETURNING), for the arrangements once the epoch commits.
        try:
            returned = fetch_arrow(
                self.con,
                f"INSERT INTO {table} SELECT {typed} FROM ({rows}) AS __r({aliases}) "
                f"RETURNING *, {', '.join(hashes)}",
            )
        except duckdb.Error as error:
            raise ExecutionError(f"appending to state failed: {error}") from error
        faults.reached("trace.appended")
        if returned.num_rows:
            self._pending.append(_Pending(table, keys, returned, held))
        return returned.num_rows

    def committed(self) -> None:
        """The epoch committed: its appended rows go into the arrangements."""
        pending, self._pending = self._pending, []
        for item in pending:
            by_key = self._arranged.get(item.table, {})
            weights = item.rows.column(WEIGHT).to_numpy()
            staged = dict(zip(item.keys, item.columns, strict=True))
            for key in [k for k in by_key if staged.get(k) != tuple(by_key[k].schema.names)]:
                del by_key[key]  # arranged (again) after the rows were staged: built again
            for i, (key, names) in enumerate(zip(item.keys, item.columns, strict=True)):
                if key in by_key:
                    keys = item.rows.column(key_hash(i)).to_numpy()
                    hashes = item.rows.column(row_hash(i)).to_numpy()
                    values = item.rows.select(list(names))
                    self._hold(item.table, key, _Unmerged(values, keys, hashes, weights))

    def _hold(self, table: str, key: tuple[str, ...], rows: _Unmerged) -> None:
        """Keep committed ``rows`` for ``table``'s arrangement by ``key`` until it is next
        read. An arrangement nobody reads costs no merging: once its unmerged rows
        outnumber ``UNMERGED_LIMIT`` and its own entries, it is dropped (rebuilt from the
        table if read again), so memory stays within about twice what it holds."""
        held = self._unmerged.setdefault((table, key), [])
        held.append(rows)
        waiting = sum(len(r.keys) for r in held)
        if waiting > max(UNMERGED_LIMIT, len(self._arranged[table][key])):
            del self._arranged[table][key]
            del self._unmerged[(table, key)]

    def rolled_back(self) -> None:
        """The epoch rolled back: what it appended is forgotten (and the setting
        ``exporting`` could not reset inside the failed transaction is reset)."""
        self._pending.clear()
        if self._reset_owed:
            self.con.execute("RESET SESSION arrow_lossless_conversion").fetchall()
            self._reset_owed = False

    def arranged(self, table: str) -> bool:
        """Whether ``table`` has an arrangement (its appends must keep it in step)."""
        return bool(self._arranged.get(table))

    def forget(self, table: str) -> None:
        """Drop ``table``'s arrangements (dropped or rewritten outside an epoch)."""
        self._arranged.pop(table, None)
        self._columns.pop(table, None)
        for key in [k for k in self._unmerged if k[0] == table]:
            del self._unmerged[key]
        for key in [k for k in self._readers if k[0] == table]:
            del self._readers[key]

    def release(self, reader: str) -> None:
        """``reader`` (a dropped view) reads no arrangement any more: drop those it was the
        last to read (a base table's arrangement outlives a view only while another view
        reads it; TPC-H's lineitem by l_orderkey holds 4 GB at SF 10)."""
        for table, key in list(self._readers):
            readers = self._readers[(table, key)]
            readers.discard(reader)
            if readers:
                continue
            del self._readers[(table, key)]
            self._unmerged.pop((table, key), None)
            by_key = self._arranged.get(table, {})
            by_key.pop(key, None)
            if not by_key:
                self._arranged.pop(table, None)

    def clear(self) -> None:
        """Drop every arrangement (rebuilt from the tables when next read)."""
        self._arranged.clear()
        self._columns.clear()
        self._pending.clear()
        self._unmerged.clear()

    # -- reporting ---------------------------------------------------------------------------

    def sizes(self) -> list[ArrangementSize]:
        """Every arrangement held: its table, key, entries, bytes and readers (the rows
        committed since its last read, merged at the next, counted in)."""
        sizes = []
        for table, by_key in self._arranged.items():
            for key, arrangement in by_key.items():
                held = self._unmerged.get((table, key), [])
                entries = len(arrangement) + sum(len(r.keys) for r in held)
                nbytes = arrangement.nbytes + sum(r.values.nbytes for r in held)
                readers = tuple(sorted(self._readers.get((table, key), ())))
                sizes.append(ArrangementSize(
                    table, key, entries, nbytes, readers,
                    tuple(arrangement.schema.names), len(self.columns(table)),
                ))
        return sizes

    def _query(self, sql: str, small: bool = False) -> pa.Table:
        """The rows of ``sql`` (``small``: an epoch's few, fetched as ``fetch_arrow`` does;
        else a whole trace's)."""
        try:
            return fetch_arrow(self.con, sql) if small else self.con.sql(sql).to_arrow_table()
        except duckdb.Error as error:
            raise ExecutionError(f"reading state failed: {error}") from error
