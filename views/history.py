"""The epochs' history kept in the state: each epoch's number, its time and when it
committed, for ``ivm status`` and anyone reading the state later (times measured up to
the commit; the last ``KEPT`` epochs are kept)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

HISTORY = "__ivm_epochs"
"""The state's table of epochs: epoch, seconds, committed at (UTC)."""
KEPT = 1000
"""How many epochs the history keeps."""


@dataclass(frozen=True)
class EpochTimes:
    """The last epoch's time and the median of those kept."""

    epoch: int
    last_seconds: float
    median_seconds: float
    committed_at: str


def create(con: duckdb.DuckDBPyConnection) -> None:
    """Create the history if the state has none (in the open transaction)."""
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {HISTORY} "
        "(epoch BIGINT, seconds DOUBLE, committed TIMESTAMPTZ)"
    ).fetchall()


def record(con: duckdb.DuckDBPyConnection, epoch: int, seconds: float) -> None:
    """Inside the epoch's transaction: add it to the history (``create`` made it), and
    every ``KEPT // 10`` epochs forget those past ``KEPT``."""
    con.execute(f"INSERT INTO {HISTORY} VALUES ({epoch}, {seconds!r}, now())").fetchall()
    if epoch % (KEPT // 10) == 0:
        con.execute(f"DELETE FROM {HISTORY} WHERE epoch <= {epoch - KEPT}").fetchall()


def read(con: duckdb.DuckDBPyConnection) -> EpochTimes | None:
    """The history's summary; None before any epoch was recorded."""
    present = con.execute(
        "SELECT 1 FROM duckdb_tables() WHERE table_name = ? AND NOT temporary", [HISTORY]
    ).fetchall()
    if not present:
        return None
    rows = con.execute(
        f"SELECT epoch, seconds, strftime(committed AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S UTC') "
        f"FROM {HISTORY} ORDER BY epoch"
    ).fetchall()
    if not rows:
        return None
    epoch, last, at = rows[-1]
    return EpochTimes(int(epoch), float(last), statistics.median(r[1] for r in rows), str(at))
