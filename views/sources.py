"""Sources: a Delta Lake table's change data feed read as batches (``ivm.sources``).

``delta_changes(path, since_version)`` reads the table's change data feed (the
``deltalake`` package, no Spark) one commit version at a time, from
``since_version`` to the latest (or ``until_version``), and yields ``(version,
batch)``: the batch is the Delta change feed of that version (the table's columns
with ``_change_type``, ``_commit_version``, ``_commit_timestamp``), which ``ingest``
reads as inserts and deletes (an update is its pre-image deleted and its
post-image inserted). Versions with no change (or written before the feed was
enabled) are skipped. The table must have ``delta.enableChangeDataFeed = true``.

``follow_delta(db, table, path)`` applies every version not applied yet, each as
one epoch of ``table``, exactly once: the last version applied is recorded in the
epoch's own transaction (as a stream, ``views.streaming``, named ``delta:<path>``),
so calling it again, after a crash or when new versions arrive, goes on from there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from ivm.errors import IvmError
from ivm.views.sinks import _deltalake

if TYPE_CHECKING:
    from ivm.views.session import Session


def delta_changes(
    path: str | os.PathLike[str], since_version: int = 0, until_version: int | None = None,
    storage_options: dict[str, str] | None = None,
) -> Iterator[tuple[int, pa.Table]]:
    """Each commit version's changes of the Delta table at ``path`` from ``since_version``
    on, as ``(version, batch)`` (see the module docstring)."""
    deltalake = _deltalake()
    try:
        table = deltalake.DeltaTable(str(path), storage_options=storage_options)
    except deltalake.exceptions.TableNotFoundError as error:
        raise IvmError(f"no Delta table at {path}") from error
    last = table.version() if until_version is None else until_version
    for version in range(max(since_version, 0), last + 1):
        try:
            stream = table.load_cdf(starting_version=version, ending_version=version)
            batch = pa.RecordBatchReader.from_stream(stream).read_all()
        except deltalake.exceptions.DeltaError as error:
            raise IvmError(
                f"Delta table {path}: cannot read the change data feed of version {version} "
                f"(is delta.enableChangeDataFeed set?): {error}"
            ) from error
        if batch.num_rows:
            yield version, batch


def follow_delta(
    db: Session, table: str, path: str | os.PathLike[str], name: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> list[int]:
    """Apply each version of the Delta table at ``path`` not applied yet to ``table``,
    one epoch per version, exactly once; returns the versions applied."""
    db._check_open()
    db._ingestible(table)
    stream = name if name is not None else f"delta:{os.fspath(path)}"
    applied = []
    since = db._streams.last_batch(stream) + 1
    for version, batch in delta_changes(path, since, storage_options=storage_options):
        db._streams.pending = (stream, version)
        try:
            db.ingest(table, batch)
        finally:
            db._streams.pending = None
        applied.append(version)
    return applied
