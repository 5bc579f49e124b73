"""ALTER TABLE in Spark mode: the table's rows, mapped to its new columns, written into a
new generation of its partition files by one Spark job.

A Spark-mode table's rows live in partition files (``ivm.storage.partitions``), one
directory per generation of the table (its catalog creation number). ``ALTER TABLE``
(``views.altering``) drops the table from the catalog and adds it again with its new
columns, which gives it a new, empty generation; ``refill_table`` then reads the live
rows of the old generation's files, each mapped to the new columns by the statement's
select list (an added column NULL, a renamed one under its new name, a dropped one left
out and the rows consolidated again), and applies them to the new generation's table
stage as a backfill at the current epoch: the epoch does not advance, and every
partition file is made, as a table created and filled by ``ingest`` would have them.

Nothing is lost on failure: the old files are removed only once the DDL commits
(``SparkEngine.removing``), the new ones as soon as it rolls back, and a driver that
dies before the commit leaves them as a stray directory, removed when a session opens.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from ivm.execution.spark.epoch_job import TableRun, run_epoch
from ivm.execution.spark.executor import translate_error
from ivm.views.resources import as_resource
from ivm.views.spark import reads

if TYPE_CHECKING:
    from ivm.views.spark.engine import SparkEngine


def old_files(engine: SparkEngine, name: str) -> list[str]:
    """The partition files holding table ``name``'s rows now (before it is altered)."""
    return reads.contents_files(engine, name)


def refill_table(engine: SparkEngine, name: str, files: list[str], select: str) -> None:
    """Fill table ``name``'s new (empty) generation with the live rows of ``files`` (its
    previous generation's), each mapped to its columns by ``select`` (see the module)."""
    s = engine.session
    directory = engine.directory(name)
    s._on_rollback.append(lambda: shutil.rmtree(directory, ignore_errors=True))
    ticket = engine._ticket(epoch=s.epoch, backfill=True)
    epoch = engine._epoch(ticket)
    rows = reads.files_change(engine._jobs.spark, files, s._tables[name].schema, select)
    tables = [TableRun(name, stage, directory, rows) for stage in engine.stages_of(name)]
    try:
        run_epoch(epoch, tables, [])  # no view reads it yet: its stage's rows are counted
    except BaseException as error:
        translated = translate_error(error)
        if translated is not None:
            subject = f"ALTER TABLE {name} ran out of memory rewriting its rows"
            raise as_resource(translated, subject, s._budget) or translated from error
        raise
