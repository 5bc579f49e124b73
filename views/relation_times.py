"""Each table's and view's epochs, kept in the state: for ``db.stats()``, ``ivm status``
and ``explain(analyze=True)`` in any later session.

Written inside the transaction of the epoch recorded or of a later one, some epochs at a
time (``views.epoch_records``; as ``views.history``), so the record holds only committed
epochs; a crash loses the times of the last few:

* ``RELATIONS``: per epoch, each table and view it changed: the seconds its change took
  and the rows of that change; the last ``KEPT`` rows of each relation are kept, and
  ``RETIRED`` counts those forgotten, so the epochs that changed a relation over the
  state's whole life are its rows plus its retired count.
* ``PROFILE``: the last epoch's profile (``EpochProfile.to_json``): its phases up to the
  commit, each view's time and each operator's (or Spark stage's) rows and time.

A write adds two statements (one INSERT into each, values inlined: parameter binding
costs more than the insert); where it records an epoch that is a multiple of
``PRUNE_EVERY``, a few more forget the past.

State written before these tables existed opens as it is: they are created at its next
epoch, and read as empty until then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ivm.execution.profile import EpochProfile

if TYPE_CHECKING:
    import duckdb

RELATIONS = "__ivm_relation_epochs"
"""The state's table of (relation, epoch, seconds, rows)."""
RETIRED = "__ivm_relation_retired"
"""The state's table of (relation, epochs): epochs of each relation no longer in ``RELATIONS``."""
PROFILE = "__ivm_last_profile"
"""The state's table of the last epoch's profile: (epoch, profile JSON)."""
KEPT = 100
"""Epochs kept per relation (for the median of its times)."""
PRUNE_EVERY = 10
"""Every this many epochs, rows past ``KEPT`` are deleted."""


@dataclass(frozen=True)
class RelationTimes:
    """What the state records of one relation's epochs."""

    last_epoch: int
    last_seconds: float
    last_rows: int
    median_seconds: float  # over the last ``KEPT`` epochs that changed it
    runs: int  # epochs that changed it, over the state's life


def create(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables if the state has none (in the open transaction)."""
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {RELATIONS} "
        "(relation VARCHAR, epoch BIGINT, seconds DOUBLE, rows BIGINT)"
    ).fetchall()
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {RETIRED} (relation VARCHAR, epochs BIGINT)"
    ).fetchall()
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {PROFILE} (epoch BIGINT, profile VARCHAR)"
    ).fetchall()


def record(con: duckdb.DuckDBPyConnection, profiles: Sequence[EpochProfile]) -> None:
    """Inside an open transaction (``create`` made the tables): add the tables and views
    each of ``profiles``' epochs (in order) changed and the last one's profile, and where
    one of the epochs is a multiple of ``PRUNE_EVERY``, forget each relation's rows past
    ``KEPT`` (counted in ``RETIRED``) and older profiles."""
    if not profiles:
        return
    values = ", ".join(
        f"({_literal(name)}, {int(profile.epoch)}, {float(seconds)!r}, "
        f"{int(profile.rows.get(name, 0))})"
        for profile in profiles
        for name, seconds in {**profile.tables, **profile.views}.items()
    )
    if values:
        con.execute(f"INSERT INTO {RELATIONS} VALUES {values}").fetchall()
    last = profiles[-1]
    con.execute(
        f"INSERT INTO {PROFILE} VALUES ({int(last.epoch)}, {_literal(last.to_json())})"
    ).fetchall()
    if any(int(p.epoch) % PRUNE_EVERY == 0 for p in profiles):
        _prune(con, int(last.epoch))


def _prune(con: duckdb.DuckDBPyConnection, epoch: int) -> None:
    """Forget each relation's rows past its last ``KEPT`` (adding them to ``RETIRED``) and
    every profile before ``epoch``'s."""
    ranked = (
        f"(SELECT relation, epoch, row_number() OVER (PARTITION BY relation "
        f"ORDER BY epoch DESC) AS n FROM {RELATIONS})"
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE __ivm_forgotten AS SELECT relation, count(*) AS epochs "
        f"FROM {ranked} WHERE n > {KEPT} GROUP BY relation"
    ).fetchall()
    con.execute(
        f"UPDATE {RETIRED} SET epochs = {RETIRED}.epochs + f.epochs FROM __ivm_forgotten AS f "
        f"WHERE {RETIRED}.relation = f.relation"
    ).fetchall()
    con.execute(
        f"INSERT INTO {RETIRED} SELECT * FROM __ivm_forgotten "
        f"WHERE relation NOT IN (SELECT relation FROM {RETIRED})"
    ).fetchall()
    con.execute(
        f"DELETE FROM {RELATIONS} USING (SELECT relation, min(epoch) AS first FROM {ranked} "
        f"WHERE n <= {KEPT} GROUP BY relation) AS k "
        f"WHERE {RELATIONS}.relation = k.relation AND {RELATIONS}.epoch < k.first"
    ).fetchall()
    con.execute(f"DELETE FROM {PROFILE} WHERE epoch < {epoch}").fetchall()
    con.execute("DROP TABLE __ivm_forgotten").fetchall()


def _literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def forget(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """A table or view is dropped (inside the DDL's transaction): its record goes too."""
    if _present(con, RELATIONS):
        con.execute(f"DELETE FROM {RELATIONS} WHERE relation = ?", [name]).fetchall()
        con.execute(f"DELETE FROM {RETIRED} WHERE relation = ?", [name]).fetchall()


def read(con: duckdb.DuckDBPyConnection) -> dict[str, RelationTimes]:
    """Each recorded relation's times, by name (empty before any epoch was recorded)."""
    if not _present(con, RELATIONS):
        return {}
    rows = con.execute(
        f"SELECT relation, max(epoch), arg_max(seconds, epoch), arg_max(rows, epoch), "
        f"median(seconds), count(*) + COALESCE(any_value(r.epochs), 0) FROM {RELATIONS} "
        f"LEFT JOIN {RETIRED} AS r USING (relation) GROUP BY relation"
    ).fetchall()
    return {
        str(name): RelationTimes(int(epoch), float(last), int(count), float(median), int(runs))
        for name, epoch, last, count, median, runs in rows
    }


def last_profile(con: duckdb.DuckDBPyConnection) -> EpochProfile | None:
    """The profile of the last epoch the state recorded; None if there is none."""
    if not _present(con, PROFILE):
        return None
    found = con.execute(f"SELECT profile FROM {PROFILE} ORDER BY epoch DESC LIMIT 1").fetchall()
    return EpochProfile.from_json(found[0][0]) if found else None


def _present(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return bool(con.execute(
        "SELECT 1 FROM duckdb_tables() WHERE table_name = ? AND NOT temporary", [table]
    ).fetchall())
