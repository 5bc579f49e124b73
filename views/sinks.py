"""Sinks: each epoch's delta of a view written out, as Parquet files or a Delta Lake table.

A sink is a changefeed subscriber (``db.subscribe(view, sink)``), called after
each commit with ``(epoch, delta)``. Both write idempotently, so delivering an
epoch twice (a job restarted after the commit but before the write finished)
leaves one copy:

* ``ParquetSink(directory)``: one file per epoch, ``epoch-<20 digits>.parquet``
  (the delta's columns, ``__w`` and ``__epoch``), written to a temporary name and
  renamed, so a reader never sees half a file; an epoch written again replaces
  its file.
* ``DeltaSink(path)``: appends each delta (with ``__epoch``) to a Delta Lake table
  through the ``deltalake`` package (a dependency of ivm; no Spark needed),
  recording the epoch as the table's application transaction version, so an
  epoch at or below the recorded one is skipped.

Empty deltas write nothing (``write_empty=True`` writes them too).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ivm.errors import IvmError

EPOCH = "__epoch"


def with_epoch(delta: pa.Table, epoch: int) -> pa.Table:
    """The delta with its epoch as a column ``__epoch``."""
    return delta.append_column(EPOCH, pa.repeat(pa.scalar(epoch, pa.int64()), delta.num_rows))


class ParquetSink:
    """Writes each epoch's delta as ``directory/epoch-<epoch>.parquet`` (module docstring)."""

    def __init__(self, directory: str | os.PathLike[str], write_empty: bool = False) -> None:
        self.directory = Path(directory)
        self.write_empty = write_empty
        self.directory.mkdir(parents=True, exist_ok=True)

    def path(self, epoch: int) -> Path:
        """The file of ``epoch``'s delta."""
        return self.directory / f"epoch-{epoch:020d}.parquet"

    def __call__(self, epoch: int, delta: pa.Table) -> None:
        if delta.num_rows == 0 and not self.write_empty:
            return
        target = self.path(epoch)
        partial = target.with_name(f".{target.name}.partial")
        pq.write_table(with_epoch(delta, epoch), partial)
        partial.replace(target)


class DeltaSink:
    """Appends each epoch's delta to the Delta Lake table at ``path`` (module docstring).

    ``app_id`` names this writer in the table's transaction log (default: ``"ivm"``);
    ``storage_options`` go to ``deltalake`` as they are (object stores)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        app_id: str = "ivm",
        write_empty: bool = False,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        self._deltalake = _deltalake()
        self.path = str(path)
        self.app_id = app_id
        self.write_empty = write_empty
        self.storage_options = storage_options

    def written(self) -> int:
        """The last epoch written (0 before any, or when there is no table yet)."""
        deltalake = self._deltalake
        try:
            table = deltalake.DeltaTable(self.path, storage_options=self.storage_options)
        except deltalake.exceptions.TableNotFoundError:
            return 0
        return int(table.transaction_version(self.app_id) or 0)

    def __call__(self, epoch: int, delta: pa.Table) -> None:
        if delta.num_rows == 0 and not self.write_empty:
            return
        if epoch <= self.written():
            return
        deltalake = self._deltalake
        properties = deltalake.CommitProperties(
            app_transactions=[deltalake.Transaction(self.app_id, epoch)]
        )
        deltalake.write_deltalake(
            self.path, with_epoch(delta, epoch), mode="append",
            commit_properties=properties, storage_options=self.storage_options,
        )


def _deltalake() -> Any:
    """The ``deltalake`` package, or an IvmError saying how to install it."""
    try:
        import deltalake
    except ImportError as error:
        raise IvmError(
            "Delta Lake sinks and sources need the deltalake package: pip install deltalake"
        ) from error
    return deltalake
