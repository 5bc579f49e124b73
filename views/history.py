"""The epochs' history kept in the state: each epoch's number, its time and when it
committed, for ``ivm status`` and anyone reading the state later (times measured up to
the commit; the last ``KEPT`` epochs are kept; written some epochs at a time,
``views.epoch_records``)."""

from __future__ import annotations

import datetime
import statistics
from collections.abc import Sequence
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


def record(
    con: duckdb.DuckDBPyConnection, epochs: Sequence[tuple[int, float, datetime.datetime]]
) -> None:
    """Inside an open transaction: add ``epochs`` (number, seconds, commit time, in order)
    to the history (``create`` made it), and where one is a multiple of ``KEPT // 10``,
    forget those past the last ``KEPT``."""
    if not epochs:
        return
    values = ", ".join(
        f"({int(epoch)}, {float(seconds)!r}, TIMESTAMPTZ '{committed.isoformat()}')"
        for epoch, seconds, committed in epochs
    )
    con.execute(f"INSERT INTO {HISTORY} VALUES {values}").fetchall()
    if any(epoch % (KEPT // 10) == 0 for epoch, _, _ in epochs):
        last = max(epoch for epoch, _, _ in epochs)
        con.execute(f"DELETE FROM {HISTORY} WHERE epoch <= {last - KEPT}").fetchall()


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
