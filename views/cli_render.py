"""How the ``ivm`` command line prints: Arrow tables and the status as ``rich`` tables."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
from rich.console import Console
from rich.table import Table

from ivm.views.history import EpochTimes
from ivm.views.stats import RelationStats


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr), wide enough for tables when not a terminal."""
    return Console(stderr=stderr, width=None if _tty(stderr) else 160)


def render_table(table: pa.Table, limit: int, title: str | None = None) -> None:
    """The first ``limit`` rows of ``table``, with its column names and types."""
    shown = Table(title=title, title_justify="left")
    for field in table.schema:
        shown.add_column(f"{field.name}\n[dim]{field.type}[/]", overflow="fold")
    for row in table.slice(0, limit).to_pylist():
        shown.add_row(*["[dim]NULL[/]" if v is None else str(v) for v in row.values()])
    out = console()
    out.print(shown)
    more = f" (showing {limit})" if table.num_rows > limit else ""
    out.print(f"{table.num_rows:,} row(s){more}", highlight=False)


def render_status(
    state: Path, epoch: int, stats: dict[str, RelationStats], times: EpochTimes | None
) -> None:
    """``ivm status``: the state's epoch and times, then one line per table and view (its
    last change's rows and epoch, its time then and the median, and how many epochs changed
    it over the state's life)."""
    out = console()
    out.print(f"[bold]state[/] {state}  ({_bytes(_on_disk(state))} on disk)", highlight=False)
    if times is None:
        out.print(f"[bold]epoch[/] {epoch}  (no epoch recorded)", highlight=False)
    else:
        out.print(
            f"[bold]epoch[/] {epoch}  last epoch {times.last_seconds * 1000:,.1f} ms at "
            f"{times.committed_at}; median {times.median_seconds * 1000:,.1f} ms",
            highlight=False,
        )
    # Times and epochs as the state recorded them (every session's, views.relation_times).
    shown = Table("name", "kind", "rows", "state", "memory", "last change", "last time",
                  "median", "epochs")
    for stat in stats.values():
        last = (
            "-" if stat.last_epoch is None else f"{stat.last_rows:,} rows, epoch {stat.last_epoch}"
        )
        shown.add_row(
            stat.name, stat.kind, f"{stat.rows:,}", _bytes(stat.state_bytes),
            _bytes(stat.memory_bytes), last, _ms(stat.last_seconds), _ms(stat.median_seconds),
            str(stat.epochs_total),
        )
    out.print(shown)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:,.1f} ms"


def _bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TB"


def _on_disk(state: Path) -> int:
    total = 0
    for root, _, files in os.walk(state):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files
                     if os.path.exists(os.path.join(root, f)))
    return total


def _tty(stderr: bool) -> bool:
    import sys

    stream = sys.stderr if stderr else sys.stdout
    return stream.isatty()
