"""``db.stats()``: per view and table, its rows, the state it keeps and its epochs' times.

* ``rows``: live rows (a view's contents, or a table's);
* ``state_bytes``: what its traces hold: embedded, estimated from each trace's rows
  and the Arrow size of a sample of them (DuckDB shares one file between all
  traces); Spark mode, the bytes of its partition files on disk;
* ``memory_bytes``: the arrangements (in-memory indexes of traces) it reads;
* ``last_seconds``, ``median_seconds``, ``epochs``: the time computing its change in
  the last epoch that changed one of its inputs, the median over the last
  ``KEPT_TIMES`` such epochs, and how many epochs this session ran it (times are
  kept in memory: a session opened afresh starts counting again).
"""

from __future__ import annotations

import os
import statistics
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ivm.execution.profile import EpochProfile
from ivm.plan.sql import W
from ivm.schema import quote
from ivm.storage.naming import unquote
from ivm.views.modes import spark_mode

if TYPE_CHECKING:
    from ivm.views.session import Session

    _Base = Session
else:
    _Base = object

KEPT_TIMES = 100
"""Epoch times kept per view for the median."""
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
    epochs: int


class Stats(_Base):
    """``stats`` of ``Session`` (see the module docstring)."""

    def _init_stats(self) -> None:
        self._times: dict[str, deque[float]] = {}
        self._runs: dict[str, int] = {}

    def _record_times(self, profile: EpochProfile | None) -> None:
        """After an epoch: keep each view's time in it."""
        if profile is None:
            return
        for view, seconds in profile.views.items():
            self._times.setdefault(view, deque(maxlen=KEPT_TIMES)).append(seconds)
            self._runs[view] = self._runs.get(view, 0) + 1

    def stats(self) -> dict[str, RelationStats]:
        """Per table and view, by name: ``rows``, ``state_bytes`` (an estimate in embedded
        mode; on-disk bytes in Spark mode), ``memory_bytes`` (arrangements it reads),
        ``last_seconds`` / ``median_seconds`` (its change's time in the last epochs that
        ran it) and ``epochs`` (how many this session ran). See ``views.stats``."""
        self._check_open()
        memory: dict[str, int] = {}
        for size in self._arrangements.sizes():
            for reader in size.readers:
                memory[reader] = memory.get(reader, 0) + size.bytes
        found = {}
        for name in [*self._tables, *self._views]:
            kind = "view" if name in self._views else "table"
            times = list(self._times.get(name, ()))
            found[name] = RelationStats(
                name, kind, self._rows(name), self._state_bytes(name), memory.get(name, 0),
                times[-1] if times else None, statistics.median(times) if times else None,
                self._runs.get(name, 0),
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
