"""The embedded session's arrangements: its traces kept in memory, searchable by key.

Every trace is a DuckDB table (its durable copy). The first time an operator reads a
trace at some keys (``Run.read(…, at=…)``, ``Run.source_integral(…, at=…)``), the
trace is *arranged* by those key columns: its live rows are loaded, once, into an
``ivm.storage.arrangement.Arrangement`` sorted by the key's hash, and from then on
every read at keys is a binary search and an Arrow ``take`` over it, never a scan of
the table. One arrangement per (trace, key columns), shared by every operator and
every view that reads the trace by that key.

An arranged trace is kept in step with its table: rows appended to the table during
an epoch are read into Arrow with their hashes first (one statement), inserted into
the table from there, and go into its arrangements once the epoch commits
(``committed``); a rolled-back epoch leaves the arrangements as they were
(``rolled_back``). Whatever is dropped or in doubt is forgotten and rebuilt from the
table at its next read.

Hashes are DuckDB's ``hash`` of the key's columns (and, for consolidation, of the whole
row), computed by DuckDB on both sides, the keys looked up cast to the trace columns'
types first, so equal values hash alike whatever type a key came with. A read returns
the rows of the hashes asked for, which may include another key's rows (a collision):
the statement that reads them keeps only the rows at the keys (``ivm.operators.reads``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from ivm.errors import ExecutionError
from ivm.operators.base import At
from ivm.plan.sql import W
from ivm.schema import quote
from ivm.storage.arrangement import Arrangement
from ivm.storage.sqltext import WEIGHT

ROW_HASH = "__ivm_rh"


def key_hash(index: int) -> str:
    """Column name of the ``index``-th arrangement's key hash in an append's rows."""
    return f"__ivm_kh{index}"


def hash_sql(columns: Sequence[str], alias: str = "") -> str:
    """SQL of DuckDB's hash of ``columns`` (0 for none): a key's hash."""
    prefix = f"{alias}." if alias else ""
    if not columns:
        return "0::UBIGINT"
    return f"hash({', '.join(prefix + quote(c) for c in columns)})"


def row_hash_sql(columns: Sequence[str], alias: str = "") -> str:
    """SQL of a row's hash, which tells rows apart: DuckDB's hash of the row's text.
    (DuckDB's ``hash`` of the values themselves is 0 for 0, for [0] and for [0, 0], and
    equal for NULL, [] and [NULL]: fine for finding keys, fatal for row identity.)"""
    prefix = f"{alias}." if alias else ""
    if not columns:
        return "0::UBIGINT"
    return f"hash(CAST(row({', '.join(prefix + quote(c) for c in columns)}) AS VARCHAR))"


@dataclass(frozen=True)
class ArrangementSize:
    """One arrangement as ``explain`` shows it."""

    table: str
    key: tuple[str, ...]
    entries: int
    bytes: int
    readers: tuple[str, ...]
    """The views that read the trace through it (one arrangement, shared)."""


@dataclass
class _Pending:
    """Rows appended to an arranged trace this epoch: their values and hashes (the row
    hash, and the key hash of each key in ``keys``, in order)."""

    table: str
    keys: list[tuple[str, ...]]
    rows: pa.Table


class Arrangements:
    """The arrangements of one embedded session's traces (see the module docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._arranged: dict[str, dict[tuple[str, ...], Arrangement]] = {}
        self._columns: dict[str, list[tuple[str, str]]] = {}
        self._pending: list[_Pending] = []
        self._exporting = False
        self._readers: dict[tuple[str, tuple[str, ...]], set[str]] = {}

    # -- reading -----------------------------------------------------------------------------

    def lookup(self, table: str, at: At, live: bool, reader: str = "") -> pa.Table:
        """The rows of trace ``table`` at ``at``'s keys' hashes (a superset of the rows at
        its keys), consolidated, with their weights (``live``: positive ones only).
        ``reader``: the view reading (``readers`` reports who shares an arrangement)."""
        arrangement = self._arrangement(table, at.columns)
        self._readers.setdefault((table, at.columns), set()).add(reader)
        types = dict(self.columns(table))
        names = [f"__k{i}" for i in range(len(at.columns))]
        cast = [f"TRY_CAST(__k.{quote(n)} AS {types[c]}) AS {quote(c)}"
                for n, c in zip(names, at.columns, strict=True)]
        hashes = self._query(
            f"SELECT DISTINCT {hash_sql(at.columns, '__c')} AS h FROM ("
            f"SELECT {', '.join(cast)} FROM ({at.keys}) AS __k({', '.join(names)})) AS __c"
        ).column(0)
        return arrangement.lookup(hashes.to_numpy(), positive_only=live)

    def columns(self, table: str) -> list[tuple[str, str]]:
        """``table``'s columns (the weight excluded): (name, DuckDB type)."""
        if table not in self._columns:
            rows = self.con.execute(f"DESCRIBE {table}").fetchall()
            self._columns[table] = [(r[0], r[1]) for r in rows if r[0] != WEIGHT]
        return self._columns[table]

    def _arrangement(self, table: str, key: tuple[str, ...]) -> Arrangement:
        """``table``'s arrangement by ``key``, built from the table at first use."""
        by_key = self._arranged.setdefault(table, {})
        if key not in by_key:
            names = [n for n, _ in self.columns(table)]
            cols = ", ".join(quote(n) for n in names)
            with self.exporting():
                rows = self._query(
                    f"SELECT {cols}, {hash_sql(key)} AS {key_hash(0)}, "
                    f"{row_hash_sql(names)} AS {ROW_HASH}, SUM({W})::BIGINT AS {W} "
                    f"FROM {table} GROUP BY ALL HAVING SUM({W}) <> 0 ORDER BY {key_hash(0)}"
                )
            # Grouped by value, so each row once: sorted by DuckDB, taken as it comes.
            by_key[key] = Arrangement.of_consolidated(
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
        arranged traces must run inside it."""
        if self._exporting:
            yield
            return
        self.con.execute("SET arrow_lossless_conversion = true").fetchall()
        self._exporting = True
        try:
            yield
        finally:
            self._exporting = False
            self.con.execute("RESET arrow_lossless_conversion").fetchall()

    def append(self, table: str, rows: str) -> int:
        """Append ``rows`` (SQL, columns in ``table``'s order, then the weight) to trace
        ``table``; returns the rows written. An arranged trace's rows are kept, with
        their hashes, for its arrangements once the epoch commits (call it inside
        ``exporting``)."""
        if table not in self._arranged:
            return _written(self.con, f"INSERT INTO {table} {rows}")
        columns = self.columns(table)
        names = [n for n, _ in columns]
        keys = list(self._arranged[table])
        aliases = ", ".join([*(quote(n) for n in names), W])
        # Typed as the table types them, so a row hashes as it will when read back.
        typed = ", ".join(
            [*(f"CAST({quote(n)} AS {t}) AS {quote(n)}" for n, t in columns),
             f"CAST({W} AS BIGINT) AS {W}"]
        )
        hashes = [f"{hash_sql(k, '__a')} AS {key_hash(i)}" for i, k in enumerate(keys)]
        staged = self._query(
            f"SELECT __a.*, {', '.join(hashes)}, {row_hash_sql(names, '__a')} AS {ROW_HASH} "
            f"FROM (SELECT {typed} FROM ({rows}) AS __r({aliases})) AS __a"
        )
        if staged.num_rows == 0:
            return 0
        assert self._exporting, "appends to arranged traces run inside exporting()"
        self.con.register("__ivm_append", staged)
        try:
            written = _written(
                self.con,
                f"INSERT INTO {table} SELECT {aliases} FROM __ivm_append",
            )
        finally:
            self.con.unregister("__ivm_append")
        self._pending.append(_Pending(table, keys, staged))
        return written

    def committed(self) -> None:
        """The epoch committed: its appended rows go into the arrangements."""
        pending, self._pending = self._pending, []
        for item in pending:
            names = [n for n, _ in self.columns(item.table)]
            by_key = self._arranged.get(item.table, {})
            values = item.rows.select(names)
            hashes = item.rows.column(ROW_HASH).to_numpy()
            weights = item.rows.column(WEIGHT).to_numpy()
            for key in [k for k in by_key if k not in item.keys]:
                del by_key[key]  # arranged after the rows were staged: built again
            for i, key in enumerate(item.keys):
                if key in by_key:
                    keys = item.rows.column(key_hash(i)).to_numpy()
                    by_key[key].insert(values, keys, hashes, weights)

    def rolled_back(self) -> None:
        """The epoch rolled back: what it appended is forgotten."""
        self._pending.clear()

    def forget(self, table: str) -> None:
        """Drop ``table``'s arrangements (dropped or rewritten outside an epoch)."""
        self._arranged.pop(table, None)
        self._columns.pop(table, None)
        for key in [k for k in self._readers if k[0] == table]:
            del self._readers[key]

    def clear(self) -> None:
        """Drop every arrangement (rebuilt from the tables when next read)."""
        self._arranged.clear()
        self._columns.clear()
        self._pending.clear()

    # -- reporting ---------------------------------------------------------------------------

    def sizes(self) -> list[ArrangementSize]:
        """Every arrangement held: its table, key, entries, bytes and readers."""
        return [
            ArrangementSize(table, key, len(a), a.nbytes,
                            tuple(sorted(self._readers.get((table, key), ()))))
            for table, by_key in self._arranged.items()
            for key, a in by_key.items()
        ]

    def _query(self, sql: str) -> pa.Table:
        try:
            return self.con.sql(sql).to_arrow_table()
        except duckdb.Error as error:
            raise ExecutionError(f"reading state failed: {error}") from error


def _written(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    """Run an INSERT; the rows it wrote."""
    try:
        rows = con.execute(sql).fetchall()
    except duckdb.Error as error:
        raise ExecutionError(f"appending to state failed: {error}") from error
    return int(rows[0][0]) if rows and rows[0] and rows[0][0] is not None else 0
