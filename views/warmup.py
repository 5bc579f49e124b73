"""Warming a new view: its arrangements built when it is created, not in its first epoch.

An epoch reads state at the change's keys through arrangements (``ivm.execution
.arrangements``), each built from its trace at first use: over a large table that is
a sort of the whole trace (lineitem at TPC-H SF1: seconds), which would land in the
first epoch after ``CREATE VIEW`` and make it many times slower than the next.

So once a view is created (its backfill committed), a *dry epoch* runs its circuit
over empty changes of the inputs that are changing (those the session's last epoch
changed: a table loaded once and never changed again needs no arrangement of the
others by its join keys, and a lineitem-sized one costs seconds and a gigabyte),
inside a transaction that is rolled back: every operator reads its state at the (no)
keys of its empty change, which builds each arrangement it will read; nothing is
appended, kept or committed. The cost moves into ``CREATE VIEW``, which reads the
whole tables anyway; the first epoch then costs what later ones do. Arrangements are
memory: a reopened session builds them at first use, as does an epoch changing an
input the warming did not expect to change.

Warming only saves time. A dry epoch that fails (it never should) is rolled back and
forgotten: the view's first epoch builds what is missing, as without warming.
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb

from ivm.errors import IvmError
from ivm.execution.arrangements import Arrangements
from ivm.execution.embedded import EpochRunner
from ivm.execution.state import StateStore
from ivm.plan.sql import empty_relation
from ivm.schema import Schema
from ivm.views.definitions import ViewDef


def warm(
    con: duckdb.DuckDBPyConnection,
    store: StateStore,
    arrangements: Arrangements,
    view: ViewDef,
    schemas: Mapping[str, Schema],
    epoch: int,
    iteration_limit: int,
) -> None:
    """Build the arrangements ``view``'s epochs read when the inputs of ``schemas`` (by
    name) change (``epoch``: the last committed one). Runs outside any transaction."""
    changes = {source: empty_relation(schema) for source, schema in schemas.items()}
    runner = EpochRunner(
        con, store, changes, iteration_limit=iteration_limit, epoch=epoch + 1,
        arrangements=arrangements, warming=True,
    )
    con.execute("BEGIN TRANSACTION").fetchall()
    try:
        with arrangements.exporting():
            runner.run(view.circuit)
    except (IvmError, duckdb.Error):
        pass  # the first epoch builds what is missing
    finally:
        con.execute("ROLLBACK").fetchall()
        arrangements.rolled_back()
        runner.release()
