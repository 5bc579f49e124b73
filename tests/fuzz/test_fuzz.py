"""The SQL fuzzer in the suite: a quick set of seeds whose queries must end maintained
and equal to DuckDB after every epoch (or refused by name), and the failures it found,
each shrunk to a minimal reproduction and kept as a strict xfail until fixed.

``make fuzz N=…`` runs more seeds (tests/fuzz/campaign.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

import pytest
from oracle.harness import Epoch

from fuzz.campaign import GROUP, run_seeds
from fuzz.driver import Drive, Outcome
from fuzz.generator import DDL, generate, schema_connection, valid_query

QUICK_GROUPS = (1000, 1008, 1056, 1080)
"""First seeds of groups of ``GROUP`` seeds whose every query passes (seeds found
failing are below, as reproductions)."""

OK = (Outcome.EXACT, Outcome.REFUSED, Outcome.DATA_ERROR)


@pytest.mark.parametrize("first", QUICK_GROUPS)
def test_quick_seeds(first: int) -> None:
    results, _ = run_seeds(range(first, first + GROUP))
    failed = [f"{r.name}: {r.outcome}\n{r.sql}\n{r.detail}" for r in results
              if r.outcome not in OK]
    assert not failed, "\n\n".join(failed)


def test_generator_is_deterministic_and_mostly_valid() -> None:
    assert generate(7) == generate(7)
    assert generate(7) != generate(8)
    check = schema_connection()
    rejected = sum(valid_query(s, check)[1] for s in range(100))
    assert rejected < 30, f"{rejected} of 100 seeds' first drafts rejected by DuckDB"


def test_the_driver_tells_wrong_from_internal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: a read that loses a row is wrong; a read that raises is internal."""
    import ivm

    views = {"v": "SELECT a, b FROM t3", "w": "SELECT s FROM t3"}
    epochs = [inserts(t3=[T3, T3B])]
    real = ivm.Session.read

    def lossy(self, name):  # noqa: ANN001, ANN202
        table = real(self, name)
        if name == "v":
            return table.slice(0, max(table.num_rows - 1, 0))
        if name == "w" and table.num_rows:
            raise RuntimeError("sabotage")
        return table

    monkeypatch.setattr(ivm.Session, "read", lossy)
    results = Drive(DDL, views, lambda _h, i: epochs[i], 1).run()
    assert results["v"].outcome == Outcome.WRONG
    assert results["w"].outcome == Outcome.INTERNAL
    assert "sabotage" in results["w"].detail


def test_the_driver_tells_too_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: an epoch that computes for 0.3 s is too slow at a 0.1 s limit."""
    import time

    import ivm

    real = ivm.Session.ingest

    def busy(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ivm.Session, "ingest", busy)
    epochs = [inserts(t3=[T3])]
    results = Drive(DDL, {"v": "SELECT a FROM t3"}, lambda _h, i: epochs[i], 1,
                    slow=0.1).run()
    assert results["v"].outcome == Outcome.SLOW



def test_the_driver_takes_a_crowded_epoch_view_by_view(monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    """Sabotage: an epoch of three views rings the alarm (as 20 views of 64-table joins
    did on a loaded machine, select5.test). The alarm allows ``hard`` seconds per live
    view, and a group it stops is no error: each view runs alone through every epoch."""
    import contextlib

    import ivm
    from fuzz import driver

    limits: list[float] = []
    flag = [[False]]

    @contextlib.contextmanager
    def alarm(seconds: float):  # noqa: ANN202
        limits.append(seconds)
        flag[0] = [False]
        yield flag[0]

    real = ivm.Session.ingest

    def crowded(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if len(self.views) > 2:
            flag[0][0] = True
            raise driver.TooSlow("still running after 3 s")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(driver, "time_limit", alarm)
    monkeypatch.setattr(ivm.Session, "ingest", crowded)
    epochs = [inserts(t3=[T3]), inserts(t3=[T3B])]
    views = {"a": "SELECT a FROM t3", "b": "SELECT b FROM t3", "c": "SELECT s FROM t3"}
    results = Drive(DDL, views, lambda _h, i: epochs[i], 2, hard=1.0).run()
    assert {n: (r.outcome, r.epoch) for n, r in results.items()} == {
        n: (Outcome.EXACT, 2) for n in views}, [r.detail for r in results.values()]
    assert 3.0 in limits, limits  # the group's epoch: 1 s for each of its 3 views

# -- reproductions of failures the fuzzer and sqllogictest found ---------------------------

T1 = (1, 2, 3, "a", 0.5, Decimal("1.50"))
T2 = (1, 2, "a", 0.5, None)
T3 = (1, 2, "a", Decimal("1.50"), True)
T3B = (2, 1, "b", Decimal("0.01"), False)


def maintained_or_refused(views: Mapping[str, str], epochs: Sequence[Epoch],
                          ddl: Sequence[str] = DDL) -> None:
    """Every view ends exact (or refused by name) through ``epochs``."""
    results = Drive(ddl, views, lambda _h, i: epochs[i], len(epochs)).run()
    bad = [f"{r.name}: {r.outcome}: {r.detail}" for r in results.values()
           if r.outcome not in OK]
    assert not bad, "\n".join(bad)


def inserts(**rows: Sequence[tuple]) -> Epoch:
    return Epoch.of({t: [("insert", r) for r in rs] for t, rs in rows.items()})


def test_group_by_without_aggregates() -> None:
    maintained_or_refused({"v": "SELECT a FROM t3 GROUP BY a"}, [inserts(t3=[T3, T3B])])


def test_rollup_of_a_comparison() -> None:
    """F2: sqlglot read only arithmetic inside ROLLUP / CUBE / GROUPING SETS."""
    maintained_or_refused({
        "rollup": "SELECT a > b AS c, COUNT(*) AS n FROM t3 GROUP BY ROLLUP (a > b)",
        "cube": "SELECT a = 1 OR b IS NULL AS c, a, COUNT(*) AS n FROM t3 "
                "GROUP BY CUBE (a = 1 OR b IS NULL, a)",
        "sets": "SELECT a, NOT f AS g, SUM(b) AS n FROM t3 "
                "GROUP BY GROUPING SETS ((a, NOT f), (NOT f), ())",
    }, [inserts(t3=[T3, T3B]), inserts(t3=[T3B])])


def test_order_by_position_of_a_subquery() -> None:
    maintained_or_refused(
        {"v": "SELECT a, (SELECT count(*) FROM t3 AS x WHERE x.b = t3.b) FROM t3 ORDER BY 2"},
        [inserts(t3=[T3, T3B])])


def test_two_views_sharing_an_operator() -> None:
    maintained_or_refused({
        "a": "SELECT q4.k FROM t1 AS q2 RIGHT JOIN t3 AS q3 ON q3.d "
             "ASOF LEFT JOIN t1 AS q4 ON q3.b <= q4.b",
        "b": "SELECT q2.x FROM t1 AS q2 SEMI JOIN t3 AS q3 ON q3.d",
    }, [inserts(t3=[(None, 5, "b", Decimal("1.50"), True), (4, 3, "a", Decimal("-3.10"), True),
                    (3, 2, "c", Decimal("10.00"), None)])])


def test_each_of_those_views_alone_is_exact() -> None:
    epoch = inserts(t3=[(None, 5, "b", Decimal("1.50"), True), (3, 2, "c", Decimal("10.00"), None)])
    maintained_or_refused({"a": "SELECT q4.k FROM t1 AS q2 RIGHT JOIN t3 AS q3 ON q3.d "
                                "ASOF LEFT JOIN t1 AS q4 ON q3.b <= q4.b"}, [epoch])
    maintained_or_refused({"b": "SELECT q2.x FROM t1 AS q2 SEMI JOIN t3 AS q3 ON q3.d"}, [epoch])


def test_a_filtered_count_of_no_rows_is_zero() -> None:
    """Seed 6421522906: a correlated COUNT … FILTER whose key has no group read NULL
    (the count bug's fix did not see through FILTER), equality- and theta-correlated."""
    maintained_or_refused({
        "eq": "SELECT (SELECT COUNT(2.25) FILTER (WHERE q4.a) FROM t2 AS q4 "
              "WHERE q4.a = q2.b) AS c1 FROM t2 AS q1 LEFT JOIN t3 AS q2 ON q2.a",
        "theta": "SELECT (SELECT COUNT(*) FILTER (WHERE q4.a > 0) FROM t2 AS q4 "
                 "WHERE q4.a < q2.b) AS c1 FROM t2 AS q1 LEFT JOIN t3 AS q2 ON q2.a",
    }, [inserts(t2=[T2, (4, 5, "", 1.5, None)], t3=[T3, T3B]),
        inserts(t2=[(2, 3, "c", 0.1, None)])])
