"""State that knows what it belongs to: manifests checked when state is reopened.

State is written under one plan and reopened under another (the engine is
changed between the two sessions, as an upgrade would change it): the view is
rebuilt from its inputs with a warning, or refused, and never attached to an
operator that did not write it. Every reopened session is then checked
against DuckDB by the oracle harness, epoch after epoch.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import duckdb
import pytest
from oracle.harness import Epoch, Harness

import ivm
from ivm.operators.aggregate import Aggregate
from ivm.storage.catalog import MANIFESTS, META

EVENTS = "CREATE TABLE events (k INTEGER, v DOUBLE, tag VARCHAR)"
VIEWS = {
    "counts": "SELECT k, COUNT(*) AS n, COUNT(tag) AS nt FROM events GROUP BY k",
    "extremes": "SELECT tag, MIN(v) AS lo, MAX(k) AS hi FROM events GROUP BY tag",
    "over_counts": "SELECT n, COUNT(*) AS groups FROM counts GROUP BY n",
}
ROWS = [(1, 0.5, "a"), (1, 1.5, "b"), (2, 2.5, "a"), (3, None, None)]
MORE = [(2, 9.5, "c"), (4, 0.1, "a")]


def state_tables(path: Path, db: object = None) -> set[str]:
    """The tables of the state file (through ``db``'s connection while it is open)."""
    con = getattr(db, "_con", None) or duckdb.connect(str(path / "ivm.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary")
        return {r[0] for r in rows.fetchall()}
    finally:
        if db is None:
            con.close()


def written(path: Path) -> Harness:
    """A harness whose session keeps state at ``path``, with the views filled."""
    harness = Harness([EVENTS], connect=lambda: ivm.connect(path))
    harness.create_views(VIEWS)
    harness.apply(Epoch.of({"events": [("insert", r) for r in ROWS]}))
    return harness


def every_aggregate_per_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planner change: aggregates that were kept as group versions become per-key."""
    monkeypatch.setattr(Aggregate, "invertible_forms", lambda self: None)


def test_reopening_under_the_same_plan_reuses_the_state(tmp_path: Path) -> None:
    harness = written(tmp_path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ivm.IvmWarning)
            harness.reopen()
        harness.apply(Epoch.of({"events": [("insert", r) for r in MORE]}))
    finally:
        harness.close()


def test_a_changed_plan_rebuilds_only_the_views_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = written(tmp_path)
    try:
        before = state_tables(tmp_path, harness.db)
        every_aggregate_per_key(monkeypatch)
        with pytest.warns(ivm.IvmWarning) as caught:
            harness.reopen()  # checks every view against DuckDB after reopening
        rebuilt = sorted(str(w.message).split("'")[1] for w in caught)
        # extremes was already per key (MIN/MAX): its plan, and so its state, is unchanged
        assert rebuilt == ["counts", "over_counts"]
        after = state_tables(tmp_path, harness.db)
        # the group-version traces of the old plan are gone, none is reused
        assert not {t for t in before - after if "#versions-" not in t}
        assert any("#versions-" in t for t in before)
        assert not any("#versions-" in t for t in after)
        harness.apply(Epoch.of({"events": [("insert", r) for r in MORE]}))
        harness.apply(Epoch.of({"events": [("delete", ROWS[0]), ("delete", MORE[1])]}))
    finally:
        harness.close()


def test_a_changed_plan_can_be_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written(tmp_path).close()
    before = state_tables(tmp_path)
    with monkeypatch.context() as patch:
        every_aggregate_per_key(patch)
        with pytest.raises(ivm.StateError, match="view 'counts'.*another plan"):
            ivm.connect(tmp_path, on_plan_change="refuse")
    assert state_tables(tmp_path) == before  # nothing was touched
    db = ivm.connect(tmp_path, on_plan_change="refuse")  # the unchanged engine opens it
    try:
        assert db.read("counts").num_rows == 3
    finally:
        db.close()


def test_a_new_state_format_rebuilds_every_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = written(tmp_path)
    try:
        monkeypatch.setattr("ivm.views.embedded.STATE_FORMAT", 999)
        with pytest.warns(ivm.IvmWarning, match="state format"):
            harness.reopen()
        harness.apply(Epoch.of({"events": [("insert", r) for r in MORE]}))
    finally:
        harness.close()


def as_format_1(path: Path) -> None:
    """Make state look as format 1 wrote it: no manifests, no creation counter, operator
    traces named by position."""
    con = duckdb.connect(str(path / "ivm.duckdb"))
    tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
    for index, table in enumerate(t for t in tables if t.startswith("__ivm_op_")):
        view = table[len("__ivm_op_") :].split("#")[0]
        con.execute(f'ALTER TABLE "{table}" RENAME TO "__ivm_op_{view}#{index}"')
    con.execute(f"DROP TABLE {MANIFESTS}")
    con.execute(f"ALTER TABLE {META} DROP COLUMN created")
    con.execute(f"UPDATE {META} SET format = 1")
    con.close()


def test_state_from_before_manifests_is_refused_untouched(tmp_path: Path) -> None:
    written(tmp_path).close()
    as_format_1(tmp_path)
    before = state_tables(tmp_path)
    with pytest.raises(ivm.StateError, match="no manifest"):
        ivm.connect(tmp_path, on_plan_change="refuse")
    assert state_tables(tmp_path) == before
    con = duckdb.connect(str(tmp_path / "ivm.duckdb"), read_only=True)
    assert con.execute(f"SELECT format FROM {META}").fetchall() == [(1,)]
    con.close()


def test_state_from_before_manifests_is_upgraded(tmp_path: Path) -> None:
    harness = written(tmp_path)
    harness.db.close()
    as_format_1(tmp_path)
    try:
        with pytest.warns(ivm.IvmWarning, match="no manifest"):
            harness.db = ivm.connect(tmp_path)
        harness.check_tables("after the upgrade")
        harness.check_views("after the upgrade")
        legacy = [t for t in state_tables(tmp_path, harness.db) if t.split("#")[-1].isdigit()]
        assert not legacy
        harness.apply(Epoch.of({"events": [("insert", r) for r in MORE]}))
        harness.db.execute("CREATE VIEW later AS SELECT k FROM events")  # numbers go on
        assert harness.db.views["later"].sources == ("events",)
    finally:
        harness.close()


def test_a_corrupt_manifest_is_damage_and_leaves_the_state_free(tmp_path: Path) -> None:
    written(tmp_path).close()
    con = duckdb.connect(str(tmp_path / "ivm.duckdb"))
    con.execute(f"UPDATE {MANIFESTS} SET manifest = '{{}}' WHERE name = 'counts'")
    con.close()
    for _ in range(2):  # the failed open held nothing: a second one fails the same way
        with pytest.raises(ivm.StateError, match="damaged.*counts"):
            ivm.connect(tmp_path)


def test_a_missing_trace_under_an_unchanged_plan_is_damage(tmp_path: Path) -> None:
    written(tmp_path).close()
    con = duckdb.connect(str(tmp_path / "ivm.duckdb"))
    (trace,) = [
        r[0]
        for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        if r[0].startswith("__ivm_op_extremes#input-")
    ]
    con.execute(f'DROP TABLE "{trace}"')
    con.close()
    with pytest.raises(ivm.StateError, match="damaged.*extremes"):
        ivm.connect(tmp_path)
