"""ivm.operators.running_aggregate under random CDC, checked against DuckDB after every epoch.

Float SUM/AVG (DOUBLE and REAL, NaN and ±inf among the values) and MIN/MAX over
numbers, strings, dates, timestamps, booleans and decimals, with FILTER, NULLs,
groups coming and going (tables emptied often), global aggregates, NULL group
keys, beside invertible calls and under a view on top. ``run_workload``
(tests/oracle/harness.py) compares each view with DuckDB's recomputation (rows
exactly, float values within 1e-9), the deltas with the contents, and the plan's
plain SQL. Float sums are exact (tests/test_float_sums.py: which rows a float
aggregate decides, compared exactly, floats included).

Random values are chosen so that DuckDB's own answer does not depend on the
order it adds rows in beyond that tolerance: a huge value only beside small ones
whose sums with it are exact (``h``), since elsewhere DuckDB's SUM is itself only
an approximation, and which one depends on the row order. Other cancellations
are scripted in test_running_edges.py, where the oracle's answer is exact.
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle.harness import MODES, run_workload
from oracle.settings import examples
from oracle.spark import SPARK_PARTITIONS
from test_sql_constructs import RANDOM_CDC

import ivm
from ivm.operators import running_aggregate
from ivm.operators.invertible_aggregate import InMemory
from ivm.operators.running_aggregate import RunningAggregate

NAN, INF = float("nan"), float("inf")

# No primary key: duplicate rows, and one copy of several deleted.
M = ("CREATE TABLE m (g INTEGER, f DOUBLE, r REAL, h DOUBLE, i INTEGER, d DECIMAL(12,2), "
     "s VARCHAR, dt DATE, ts TIMESTAMP, b BOOLEAN, ok BOOLEAN)")

FINITE = (0.5, 1.5, -2.25, 0.1, 0.3, 100.0, 4.0)
DOMAINS: dict[str, tuple[Any, ...]] = {
    "m.g": (0, 1, 2),            # few groups: they fill, empty and refill
    # NaN and the infinities come and go, among values more frequent than they are
    "m.f": (*FINITE, *FINITE, NAN, INF, -INF),
    "m.r": (0.5, 1.5, -2.25, 0.1, 3.0, 0.5, 1.5, -2.25, INF, NAN),
    # Huge beside small, all sums exact in DOUBLE (so DuckDB's, in any order, too), and
    # cancelling (2^40 − 2^40 + 0.5): the exact limbs carry and borrow.
    "m.h": (0.5, 1.5, -2.25, 3.0, 2.0**40, -(2.0**40), 2.0**40 + 0.25),
    "m.i": (0, 1, 2, 3, 5),
    "m.d": tuple(Decimal(v) for v in ("0.00", "1.50", "-3.10", "99.99", "10.00")),
    "m.s": ("a", "b", "c", "A", ""),
    "m.dt": tuple(datetime.date(2024, 1, d) for d in (1, 2, 15, 31)),
    "m.ts": tuple(datetime.datetime(2024, 1, 1, h) for h in (0, 6, 12, 23)),
}

VIEWS = {
    "float_sums": "SELECT g, COUNT(*) AS n, SUM(f) AS sf, AVG(f) AS af, SUM(r) AS sr, "
                  "AVG(r) AS ar, COUNT(f) AS nf, SUM(f) FILTER (WHERE ok) AS sfo, "
                  "AVG(r) FILTER (WHERE i > 1) AS aro, SUM(i) AS si, SUM(h) AS sh, "
                  "AVG(h) FILTER (WHERE ok) AS aho, MAX(h) AS hh FROM m GROUP BY g",
    "extremes": "SELECT g, MIN(f) AS lf, MAX(f) AS hf, MIN(r) AS lr, MAX(i) AS hi, "
                "MIN(d) AS ld, MAX(s) AS hs, MIN(dt) AS ldt, MAX(ts) AS hts, MAX(b) AS hb, "
                "MIN(b) AS lb, MIN(s) FILTER (WHERE ok) AS lso, "
                "MAX(i) FILTER (WHERE s <> 'a') AS hio, MAX(d) FILTER (WHERE NOT ok) AS hdo "
                "FROM m GROUP BY g",
    # A NULL group key (s), a float sum beside an extreme of the same column.
    "mixed": "SELECT g, s, COUNT(*) AS n, SUM(i) AS si, MAX(f) AS hf, SUM(f) AS sf, "
             "AVG(f) FILTER (WHERE ok) AS afo, MIN(dt) AS ldt FROM m GROUP BY g, s",
    "global": "SELECT COUNT(*) AS n, SUM(f) AS sf, AVG(r) AS ar, SUM(h) AS sh, MAX(s) AS hs, "
              "MIN(f) FILTER (WHERE ok) AS lfo, MAX(ts) AS hts FROM m",
    # a running aggregate over a running aggregate
    "on_top": "SELECT hs, COUNT(*) AS groups, MAX(hf) AS top, SUM(sf) AS total "
              "FROM (SELECT g, MAX(s) AS hs, MAX(f) AS hf, SUM(f) AS sf FROM m GROUP BY g) "
              "AS x GROUP BY hs",
}


@pytest.mark.parametrize("view", list(VIEWS))
@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_running_aggregate(view: str, data: st.DataObject) -> None:
    # Tables are emptied often ("clear"): groups and their extremes come and go.
    run_workload([M], {view: VIEWS[view]}, data, epochs=15, domains=DOMAINS,
                 modes=(*MODES, "clear"))


@pytest.mark.parametrize("view", ["float_sums", "extremes"])
@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_running_aggregate_in_its_statements(view: str, data: st.DataObject) -> None:
    # Embedded epochs step in memory (ivm.operators.running_step); the statements step
    # where it cannot decide, in Spark tasks and recursions: the same workload through them.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(running_aggregate, "stepped_in_memory",
                      lambda op, run, change: InMemory.UNDECIDED)
        run_workload([M], {view: VIEWS[view]}, data, epochs=15, domains=DOMAINS,
                     modes=(*MODES, "clear"))


@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_running_aggregate_survives_reopening(data: st.DataObject,
                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("running")
    run_workload([M], {"float_sums": VIEWS["float_sums"], "extremes": VIEWS["extremes"]},
                 data, epochs=8, domains=DOMAINS, reopen_every=3,
                 connect=lambda: ivm.connect(directory))


def test_views_take_the_running_path() -> None:
    db = ivm.connect()
    try:
        db.execute(M)
        for name, sql in VIEWS.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
            assert "RunningAggregate by" in db.explain(name), db.explain(name)
        for sql, kind in [
            # a per-key call keeps the whole view per key
            ("SELECT g, MAX(f) AS h, MEDIAN(f) AS m FROM m GROUP BY g", "GroupRecompute"),
            ("SELECT g, SUM(f) AS s, COUNT(DISTINCT i) AS c FROM m GROUP BY g", "GroupRecompute"),
            ("SELECT g, MIN(DISTINCT f) AS l FROM m GROUP BY g", "GroupRecompute"),
            ("SELECT g, VAR_SAMP(f) AS v, MAX(i) AS h FROM m GROUP BY g", "GroupRecompute"),
            # exact calls only: no input kept
            ("SELECT g, SUM(i) AS s, AVG(d) AS a, COUNT(f) AS n FROM m GROUP BY g",
             "InvertibleAggregate"),
        ]:
            db.execute(f"CREATE OR REPLACE VIEW other AS {sql}")
            assert f"{kind} by" in db.explain("other"), (sql, db.explain("other"))
    finally:
        db.close()


def test_embedded_epochs_step_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # Which path stepped each epoch: SQL of the versions (in memory) or InMemory (the
    # statements). Extremes of numbers, decimals, strings, dates and timestamps and float
    # sums step in memory; a float extreme holding NaN leaves it to the statements.
    steps: list[object] = []
    original = running_aggregate.stepped_in_memory

    def spied(op: RunningAggregate, run: Any, change: str) -> object:
        steps.append(original(op, run, change))
        return steps[-1]

    monkeypatch.setattr(running_aggregate, "stepped_in_memory", spied)
    db = ivm.connect()
    try:
        db.execute(M)
        db.execute("CREATE VIEW v AS SELECT g, MAX(i) AS hi, MIN(d) AS ld, MAX(s) AS hs, "
                   "MIN(dt) AS ldt, MAX(ts) AS hts, SUM(f) AS sf, MAX(f) AS hf FROM m GROUP BY g")
        row = {"g": 1, "f": 1.5, "r": 0.5, "h": 0.5, "i": 3, "d": Decimal("1.50"), "s": "b",
               "dt": datetime.date(2024, 1, 2), "ts": datetime.datetime(2024, 1, 1, 6),
               "b": True, "ok": True}
        db.ingest("m", [row, {**row, "g": 2, "i": 5}])
        db.ingest("m", [{**row, "__w": -1}, {**row, "i": 1, "f": 2.5, "__w": 1}])  # max leaves
        db.ingest("m", [{**row, "f": NAN}])  # a NaN among the floats
        assert [isinstance(s, str) for s in steps] == [True, True, False], steps
        assert steps[-1] is InMemory.UNDECIDED
        expected = db.sql("SELECT g, MAX(i) AS hi, MIN(d) AS ld, MAX(s) AS hs, MIN(dt) AS ldt, "
                          "MAX(ts) AS hts, SUM(f) AS sf, MAX(f) AS hf FROM m GROUP BY g")
        # (compared as text: NaN is not equal to itself)
        assert sorted(map(str, db.read("v").to_pylist())) == sorted(map(str, expected.to_pylist()))
    finally:
        db.close()


def test_sum_and_avg_of_one_column_share_their_state() -> None:
    db = ivm.connect()
    try:
        db.execute(M)
        db.execute("CREATE VIEW v AS SELECT g, SUM(f) AS s, AVG(f) AS a, MAX(f) AS h, "
                   "SUM(f) FILTER (WHERE ok) AS so FROM m GROUP BY g")
        (op,) = [o for o in db._views["v"].circuit.operators
                 if isinstance(o, RunningAggregate)]
        running = [c for c in op.state.names if c.startswith("__s")]
        # one sum read from rows for SUM and AVG, one for the FILTERed SUM, one extreme
        assert len(running) == 4, running
        moments = [c for c in op.state.names if c.startswith("__m")]
        # non-NULL count (shared by SUM, AVG and MAX), ±inf/NaN and out-of-range counts,
        # three exact limbs; the FILTERed ones
        assert len(moments) == 14, moments
    finally:
        db.close()


# --- the same in Spark mode: equal to DuckDB, so to embedded mode -----------------------

@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_running_aggregate_on_spark(data: st.DataObject, spark: Any,
                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    # Spark epochs cost seconds: only a random workload is run.
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-running")
    views = {name: VIEWS[name] for name in ("float_sums", "extremes", "global")}
    run_workload([M], views, data, epochs=2, domains=DOMAINS, modes=(*MODES, "clear"),
                 connect=lambda: ivm.connect(directory, spark=spark,
                                             partitions=SPARK_PARTITIONS))
