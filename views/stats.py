"""``db.stats()``: per view and table, its rows, the state it keeps and its epochs' times.

* ``rows``: live rows (a view's contents, or a table's);
* ``state_bytes``: what its traces hold: embedded, estimated from each trace's rows
  and the Arrow size of a sample of them (DuckDB shares one file between all
  traces); Spark mode, the bytes of its partition files on disk;
* ``memory_bytes``: the arrangements (in-memory indexes of traces) it reads;
* ``last_seconds``, ``median_seconds``: the time computing its change in the last epoch
  that changed it (a table) or one of its inputs (a view), and the median over the last
  ``relation_times.KEPT`` such epochs; ``last_epoch`` and ``last_rows``: that epoch and
  the rows of its change; ``epochs_total``: how many epochs changed it over the state's
  whole life. All recorded in the state with each epoch (``views.relation_times``), so
  a session opened afresh shows them too;
* ``epochs``: how many of those epochs this session ran.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ivm.execution.profile import EpochProfile
from ivm.plan.sql import W
from ivm.schema import quote
from ivm.storage.naming import unquote
from ivm.views import relation_times
from ivm.views.modes import spark_mode

if TYPE_CHECKING:
    from ivm.views.session import Session

    _Base = Session
else:
    _Base = object

SAMPLE_ROWS = 1000
"""Rows sampled per trace to estimate its bytes."""


@dataclass(frozen=True)
class RelationStats:
    """What ``db.stats()`` says of one view or table (see the module docstring)."""

    name: str
    kind: str  # "view" or "table"
    rows: int
    state_bytes: int
    memory_bytes: int
    last_seconds: float | None
    median_seconds: float | None
    epochs: int  # this session's
    epochs_total: int = 0  # over the state's life
    last_epoch: int | None = None
    last_rows: int | None = None


class Stats(_Base):
    """``stats`` of ``Session`` (see the module docstring)."""

    def _init_stats(self) -> None:
        self._runs: dict[str, int] = {}

    def _record_times(self, profile: EpochProfile | None) -> None:
        """After an epoch committed: count it for each table and view it changed (the times
        went into the state with it, ``views.relation_times``)."""
        if profile is None:
            return
        for name in {*profile.tables, *profile.views}:
            self._runs[name] = self._runs.get(name, 0) + 1

    def stats(self) -> dict[str, RelationStats]:
        """Per table and view, by name: ``rows``, ``state_bytes`` (an estimate in embedded
        mode; on-disk bytes in Spark mode), ``memory_bytes`` (arrangements it reads),
        ``last_seconds`` / ``median_seconds`` (its change's time in the last epochs that
        changed it), ``last_epoch``, ``last_rows`` and ``epochs_total`` (recorded in the state,
        over its whole life) and ``epochs`` (how many this session ran). See ``views.stats``."""
        self._check_open()
        memory: dict[str, int] = {}
        for size in self._arrangements.sizes():
            for reader in size.readers:
                memory[reader] = memory.get(reader, 0) + size.bytes
        self._records.flush(self._con)  # the epochs' times held (views.epoch_records)
        recorded = relation_times.read(self._con)
        found = {}
        for name in [*self._tables, *self._views]:
            kind = "view" if name in self._views else "table"
            times = recorded.get(name)
            found[name] = RelationStats(
                name, kind, self._rows(name), self._state_bytes(name), memory.get(name, 0),
                times.last_seconds if times else None, times.median_seconds if times else None,
                self._runs.get(name, 0), times.runs if times else 0,
                times.last_epoch if times else None, times.last_rows if times else None,
            )
        return found

    def _rows(self, name: str) -> int:
        if spark_mode(self):
            return int(self.sql(f"SELECT COUNT(*) AS n FROM {quote(name)}").column(0)[0].as_py())
        trace = self._names.relation_trace(name)
        return int(self._con.execute(f"SELECT COALESCE(SUM({W}), 0) FROM {trace}").fetchall()[0][0])

    def _state_bytes(self, name: str) -> int:
        if spark_mode(self):
            directory = self._engine.directory(name)
            assert directory is not None  # Spark mode keeps each relation in its files
            return _directory_bytes(directory)
        manifest = self._catalog.manifest(name) if name in self._views else None
        traces = [self._names.relation_trace(name)]
        if manifest is not None:
            traces = [t.location for t in manifest.traces]
        return sum(self._trace_bytes(t) for t in traces)

    def _trace_bytes(self, trace: str) -> int:
        """The trace's rows times the Arrow bytes per row of a sample of them."""
        found = self._con.execute(
            "SELECT estimated_size FROM duckdb_tables() WHERE table_name = ? AND NOT temporary",
            [unquote(trace)],
        ).fetchall()
        rows = int(found[0][0]) if found else 0
        if rows == 0:
            return 0
        sample = self._con.sql(
            f"SELECT * FROM {trace} USING SAMPLE {SAMPLE_ROWS} ROWS"
        ).to_arrow_table()
        return rows * sample.nbytes // max(sample.num_rows, 1)


def _directory_bytes(directory: Path) -> int:
    """The bytes of every file under ``directory``."""
    total = 0
    for root, _, files in os.walk(directory):
        for file in files:
            try:
                total += os.path.getsize(os.path.join(root, file))
            except OSError:  # removed meanwhile
                continue
    return total
