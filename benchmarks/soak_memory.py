"""Where the soak's memory is: the process tree's resident set, split into what each part
says it holds, sampled after every epoch and around every reopen (``bench_soak --samples``).

A sample's columns (bytes unless named otherwise):

* ``rss``: the resident set of this process and every process under it (in Spark mode
  the JVM and its Python workers; embedded, this process alone);
* ``driver_rss``: this process's own resident set;
* ``python``: the bytes Python's allocator has handed out (``sys.getallocatedblocks``
  times an average block, so a trend, not an exact figure) — with ``--tracemalloc``,
  tracemalloc's exact traced bytes instead;
* ``arrow``: Arrow's memory pool (every Arrow buffer of the process);
* ``duckdb``: the session's DuckDB buffer manager (``duckdb_memory()``), embedded only;
* ``oracle``: the oracle's DuckDB (an in-memory copy of the tables: part of the RSS,
  not of ivm);
* ``state``: what the session's in-memory state says it holds (arrangements, row
  indexes, the replay ledger, operators' memory such as the ASOF time indexes);
* ``free``: glibc's free bytes inside its heap arenas (``mallinfo2``'s ``fordblks``):
  memory freed by the program but not given back to the system, fragmentation's
  measure;
* ``glibc_used``: the bytes glibc's ``malloc`` has handed out and not had back (its
  arenas' ``uordblks`` and its own mappings' ``hblkhd``): numpy's arrays, DuckDB's
  ``new``, Python's large objects;
* ``jemalloc``: the resident bytes of DuckDB's own allocator (jemalloc, linked into
  DuckDB's library under the prefix ``duckdb_je_``; ``stats.resident``), every DuckDB
  database of the process together (the session's, the oracle's);
* ``full_gcs``: how many full (generation 2) collections Python's cyclic collector has
  run so far (what is freed only by it, objects in reference cycles, waits for one).

RSS minus the parts it explains is what no part claims (allocator overhead, code,
thread stacks, the JVM's heap in Spark mode).
"""

from __future__ import annotations

import csv
import ctypes
import ctypes.util
import gc
import sys
import tracemalloc
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow as pa

PAGE = 4096
BLOCK_BYTES = 64
"""An average small-object block: ``getallocatedblocks`` counts blocks, not bytes."""


@dataclass(frozen=True)
class Sample:
    """One sample of the process's memory, at ``epoch`` after ``phase``."""

    epoch: int
    phase: str
    seconds: float
    rss: int
    driver_rss: int
    python: int
    arrow: int
    duckdb: int
    oracle: int
    state: int
    free: int
    glibc_used: int
    jemalloc: int
    full_gcs: int


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


def _libc() -> Any:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


LIBC = _libc()


def malloc_free_bytes() -> int:
    """glibc's free bytes inside its arenas (0 where ``mallinfo2`` is missing)."""
    function = getattr(LIBC, "mallinfo2", None)
    if function is None:
        return 0
    function.restype = _MallInfo2
    return int(function().fordblks)


def malloc_used_bytes() -> int:
    """The bytes glibc's ``malloc`` has handed out (0 where ``mallinfo2`` is missing)."""
    function = getattr(LIBC, "mallinfo2", None)
    if function is None:
        return 0
    function.restype = _MallInfo2
    info = function()
    return int(info.uordblks + info.hblkhd)


def _duckdb_mallctl() -> Any:
    """DuckDB's jemalloc ``mallctl`` (None where its library has none)."""
    try:
        import _duckdb
        return getattr(ctypes.CDLL(_duckdb.__file__), "duckdb_je_mallctl", None)
    except (ImportError, OSError):
        return None


MALLCTL = _duckdb_mallctl()


def jemalloc_resident() -> int:
    """The resident bytes of DuckDB's jemalloc, refreshed (0 where it is not linked)."""
    if MALLCTL is None:
        return 0
    epoch, value = ctypes.c_uint64(1), ctypes.c_size_t(0)
    MALLCTL(b"epoch", None, None, ctypes.byref(epoch), ctypes.c_size_t(8))
    size = ctypes.c_size_t(ctypes.sizeof(value))
    if MALLCTL(b"stats.resident", ctypes.byref(value), ctypes.byref(size), None, 0) != 0:
        return 0
    return int(value.value)


def malloc_trim() -> None:
    """Give glibc's free arena memory back to the system (where glibc has the call)."""
    function = getattr(LIBC, "malloc_trim", None)
    if function is not None:
        function(0)


def process_rss(pid: int | str = "self") -> int:
    """A process's resident set now (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * PAGE
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def tree_rss(pid: int | None = None) -> int:
    """The resident set of ``pid`` (this process) and every process below it."""
    import os

    pending, total = [pid or os.getpid()], 0
    while pending:
        current = pending.pop()
        total += process_rss(current)
        pending += _children(current)
    return total


def duckdb_bytes(con: Any) -> int:
    """The bytes a DuckDB connection's buffer manager holds."""
    found = con.execute("SELECT SUM(memory_usage_bytes) FROM duckdb_memory()").fetchall()
    return int(found[0][0] or 0)


def python_bytes() -> int:
    """Python's allocated bytes: tracemalloc's while it traces, else a block estimate."""
    if tracemalloc.is_tracing():
        return tracemalloc.get_traced_memory()[0]
    return sys.getallocatedblocks() * BLOCK_BYTES


class Sampler:
    """Samples of one soak run, written as CSV rows as they are taken (``path``)."""

    def __init__(self, path: Path | None, oracle_con: Any, started: float) -> None:
        self.samples: list[Sample] = []
        self._oracle, self._started = oracle_con, started
        self._file = open(path, "w", newline="") if path else None  # noqa: SIM115 - kept open
        self._writer = csv.writer(self._file) if self._file else None
        if self._writer:
            self._writer.writerow([f.name for f in fields(Sample)])

    def take(self, db: Any, epoch: int, phase: str, now: float) -> Sample:
        """A sample of the process now (``db``: the open session, or None when closed)."""
        from ivm.views.modes import spark_mode
        from ivm.views.resources import held_bytes

        open_db = db is not None and not getattr(db, "_closed", False)
        own = open_db and not spark_mode(db)
        sample = Sample(
            epoch, phase, round(now - self._started, 3), tree_rss(), process_rss(),
            python_bytes(), pa.total_allocated_bytes(),
            duckdb_bytes(db._con) if own else 0, duckdb_bytes(self._oracle),
            held_bytes(db) if open_db else 0, malloc_free_bytes(), malloc_used_bytes(),
            jemalloc_resident(), gc.get_stats()[2]["collections"],
        )
        self.samples.append(sample)
        if self._writer and self._file:
            self._writer.writerow(asdict(sample).values())
            self._file.flush()  # a run's samples readable while it runs
        return sample

    def close(self) -> None:
        """Close the CSV file."""
        if self._file:
            self._file.close()


def growth_table(samples: list[Sample], phase: str, every: int) -> list[str]:
    """Lines of a text table: each part at every ``every``-th epoch's ``phase`` sample."""
    rows = [s for s in samples if s.phase == phase and s.epoch % every == 0]
    names = ("rss", "driver_rss", "python", "arrow", "duckdb", "oracle", "state", "free",
             "glibc_used", "jemalloc")
    lines = ["epoch  " + " ".join(f"{n:>10s}" for n in names)]
    for s in rows:
        lines.append(f"{s.epoch:5d}  " + " ".join(
            f"{getattr(s, n) / 2**20:10.1f}" for n in names))
    return lines
