"""WITH RECURSIVE under random CDC, against DuckDB's own WITH RECURSIVE.

Edges are drawn from six nodes (and NULL), in a table without a key: graphs have
cycles, self-loops, duplicate edges and nodes no edge touches, and every epoch
inserts and deletes edges (several at once, updates, everything at once). The
views are the classic recursive queries: transitive closure (linear, and
non-linear as DuckDB evaluates it: each reference reads the previous iteration's
rows), reachability, same generation, hop distance, connected components, path
counting over the DAG of increasing edges (UNION ALL) and a parts explosion.
Hand-written cases pin retraction through cycles, convergence and the iteration
limit; one group runs in Spark mode.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle.harness import Epoch, Harness, run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

TABLES = [
    "CREATE TABLE e (s INTEGER, d INTEGER)",
    "CREATE TABLE src (id INTEGER)",
    "CREATE TABLE nodes (id INTEGER PRIMARY KEY)",
    "CREATE TABLE bom (assembly INTEGER, part INTEGER, qty INTEGER)",
]
NODES = (0, 1, 2, 3, 4, 5)
DOMAINS = {
    "e.s": (*NODES, None), "e.d": (*NODES, None), "src.id": (0, 1, 2), "nodes.id": NODES,
    "bom.assembly": (0, 1, 2, 3), "bom.part": (1, 2, 3, 4), "bom.qty": (1, 2, 3, None),
}

VIEWS = {
    "tc": "WITH RECURSIVE r(a, b) AS (SELECT s, d FROM e UNION "
          "SELECT r.a, e.d FROM r JOIN e ON r.b = e.s) SELECT * FROM r",
    "tc_nonlinear": "WITH RECURSIVE r(a, b) AS (SELECT s, d FROM e UNION "
                    "SELECT x.a, y.b FROM r x JOIN r y ON x.b = y.a) SELECT a, b FROM r",
    "reach": "WITH RECURSIVE r(n) AS (SELECT id FROM src UNION "
             "SELECT e.d FROM r JOIN e ON r.n = e.s) SELECT n FROM r",
    "same_generation": "WITH RECURSIVE sg(x, y) AS ("
                       "SELECT e1.d, e2.d FROM e e1 JOIN e e2 ON e1.s = e2.s UNION "
                       "SELECT e1.d, e2.d FROM sg JOIN e e1 ON e1.s = sg.x "
                       "JOIN e e2 ON e2.s = sg.y) SELECT * FROM sg",
    "hops": "WITH RECURSIVE h(n, k) AS (SELECT id, 0 FROM src UNION "
            "SELECT e.d, h.k + 1 FROM h JOIN e ON h.n = e.s WHERE h.k < 7) "
            "SELECT n, MIN(k) AS dist FROM h GROUP BY n",
    "components": "WITH RECURSIVE cc(n, label) AS (SELECT id, id FROM nodes UNION "
                  "SELECT x.d, cc.label FROM cc JOIN (SELECT s, d FROM e UNION ALL "
                  "SELECT d, s FROM e) x ON cc.n = x.s) "
                  "SELECT n, MIN(label) AS component FROM cc GROUP BY n",
    "dag_paths": "WITH RECURSIVE p(n, c) AS (SELECT id, 1 FROM src UNION ALL "
                 "SELECT e.d, p.c FROM p JOIN e ON p.n = e.s WHERE e.s < e.d) "
                 "SELECT n, SUM(c) AS paths, COUNT(*) AS k FROM p GROUP BY n",
    "explosion": "WITH RECURSIVE x(part, qty) AS (SELECT part, qty FROM bom WHERE assembly = 0 "
                 "UNION ALL SELECT b.part, x.qty * b.qty FROM x JOIN bom b "
                 "ON x.part = b.assembly WHERE b.assembly < b.part) "
                 "SELECT part, SUM(qty) AS total, COUNT(*) AS uses FROM x GROUP BY part",
}
COMPOSED = {
    # several CTEs, recursive or not, in one WITH; a join and DISTINCT over the result
    "ctes": "WITH RECURSIVE out_edges AS (SELECT DISTINCT s, d FROM e WHERE s <> d), "
            "r(a, b) AS (SELECT s, d FROM out_edges UNION "
            "SELECT r.a, o.d FROM r JOIN out_edges o ON r.b = o.s), "
            "roots AS (SELECT id FROM src) "
            "SELECT DISTINCT r.b FROM r JOIN roots ON r.a = roots.id",
    # two recursions in one view, the second reading the first
    "chained": "WITH RECURSIVE r(n) AS (SELECT id FROM src UNION "
               "SELECT e.d FROM r JOIN e ON r.n = e.s), "
               "q(n, k) AS (SELECT n, 0 FROM r UNION SELECT e.s, q.k + 1 FROM q "
               "JOIN e ON q.n = e.d WHERE q.k < 2) SELECT n, k FROM q",
    # a recursion inside a subquery, aggregated
    "counted": "SELECT a, COUNT(*) AS reach FROM (WITH RECURSIVE r(a, b) AS ("
               "SELECT s, d FROM e UNION SELECT r.a, e.d FROM r JOIN e ON r.b = e.s) "
               "SELECT * FROM r) t GROUP BY a",
    # a bounded counter with an aggregate in the step (DuckDB evaluates it per iteration)
    "counter": "WITH RECURSIVE c(i) AS (SELECT MIN(id) FROM src UNION ALL "
               "SELECT MAX(i) + 1 FROM c HAVING MAX(i) < 3) SELECT i FROM c",
    # the CTE read by a subquery of the step: a semi join per iteration
    "in_subquery": "WITH RECURSIVE r(n) AS (SELECT id FROM src UNION SELECT e.d FROM e "
                   "WHERE e.s IN (SELECT n FROM r)) SELECT n FROM r",
    # the step reads another relation through a scalar subquery (a one-row import)
    "bounded": "WITH RECURSIVE c(i) AS (SELECT i FROM (VALUES (0)) v(i) UNION ALL "
               "SELECT i + 1 FROM c WHERE i < (SELECT COUNT(*) FROM src)) SELECT i FROM c",
}

GROUPS = {
    "closure": ["tc", "tc_nonlinear", "reach", "same_generation"],
    "labels": ["hops", "components"],
    "union_all": ["dag_paths", "explosion"],
    "composed": list(COMPOSED),
}


def _views(names: list[str]) -> dict[str, str]:
    return {n: VIEWS.get(n) or COMPOSED[n] for n in names}


@pytest.mark.parametrize("group", list(GROUPS))
@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_recursive(group: str, data: st.DataObject) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    run_workload(TABLES, _views(GROUPS[group]), data, epochs=8, domains=DOMAINS, warmup=2,
                 max_ops=8, modes=("one", "several", "several", "several", "clear"))


REACH = {"reach": VIEWS["reach"]}


def _apply(harness: Harness, script: list[dict[str, list[tuple]]]) -> None:
    for ops in script:
        harness.apply(Epoch.of(ops))


def test_retraction_through_a_cycle() -> None:
    """Rows derived only through each other lose every derivation with the edge that fed
    the cycle, and come back with it."""
    harness = Harness(TABLES, DOMAINS)
    try:
        harness.create_views(REACH)
        cycle = [(0, 1), (1, 2), (2, 1), (2, 3), (3, 3)]
        _apply(harness, [
            {"src": [("insert", (0,))], "e": [("insert", edge) for edge in cycle]},
            {"e": [("delete", (0, 1))]},  # 1, 2, 3 were reachable only through 0 → 1
            {"e": [("insert", (0, 1))]},
            {"e": [("insert", (0, 1))]},  # a duplicate edge: a second derivation
            {"e": [("delete", (0, 1))]},  # one copy left: nothing changes
            {"e": [("delete", (0, 1)), ("insert", (0, 2))]},  # the cycle entered elsewhere
        ])
    finally:
        harness.close()


def test_a_row_born_again_later() -> None:
    """A row whose first derivation goes away is born again at the iteration of its next
    derivation, which nothing else in the epoch touches."""
    harness = Harness(TABLES, DOMAINS)
    try:
        harness.create_views({**REACH, "hops": VIEWS["hops"]})
        _apply(harness, [
            {"src": [("insert", (0,))],
             "e": [("insert", edge) for edge in [(0, 1), (0, 2), (2, 3), (3, 4), (4, 1)]]},
            {"e": [("delete", (0, 1))]},  # 1 is now born at iteration 4, through 4
            {"e": [("insert", (0, 1)), ("delete", (2, 3))]},
            {"e": [("delete", (0, 1))]},  # and now not at all
        ])
    finally:
        harness.close()


def test_updates_and_deletes_in_one_epoch() -> None:
    harness = Harness(TABLES, DOMAINS)
    try:
        harness.create_views(_views(GROUPS["closure"]))
        _apply(harness, [
            {"e": [("insert", (i, (i + 1) % 6)) for i in range(6)]},  # one big cycle
            {"e": [("update", (2, 3), (2, 5)), ("delete", (4, 5)), ("insert", (5, 5))]},
            {"e": [("delete", (i, (i + 1) % 6)) for i in (0, 1, 3, 5)]},
        ])
    finally:
        harness.close()


CYCLE_FOREVER = ("WITH RECURSIVE r(n) AS (SELECT id FROM src UNION ALL "
                 "SELECT e.d FROM r JOIN e ON r.n = e.s) SELECT n FROM r")


def test_the_iteration_limit_rejects_the_batch() -> None:
    """UNION ALL around a cycle never converges: the batch that closes the cycle is rejected
    whole, naming the view and the limit, and everything stays as it was."""
    db = ivm.connect(iteration_limit=40)
    try:
        db.execute(";".join(TABLES) + f"; CREATE VIEW walks AS {CYCLE_FOREVER}")
        db.ingest({"src": [{"id": 0}], "e": [{"s": 0, "d": 1}, {"s": 1, "d": 2}]})
        before = sorted(db.read("walks").column("n").to_pylist())
        with pytest.raises(ivm.IterationLimitError, match=r"'walks'.*40 iterations"):
            db.ingest("e", [{"s": 2, "d": 0}])
        assert db.epoch == 1
        assert sorted(db.read("walks").column("n").to_pylist()) == before == [0, 1, 2]
        assert db.read("e").num_rows == 2
        db.iteration_limit = 1000
        db.ingest("e", [{"s": 2, "d": 3}])  # the session goes on
        assert sorted(db.read("walks").column("n").to_pylist()) == [0, 1, 2, 3]
        with pytest.raises(ivm.IvmError, match="positive integer"):
            db.iteration_limit = 0
    finally:
        db.close()


def test_a_view_that_never_converges_is_not_created() -> None:
    db = ivm.connect(iteration_limit=25)
    try:
        db.execute(";".join(TABLES))
        db.ingest("src", [{"id": 1}])
        with pytest.raises(ivm.IterationLimitError, match=r"'counter'.*25 iterations"):
            db.execute("CREATE VIEW counter AS WITH RECURSIVE c(i) AS (SELECT id FROM src "
                       "UNION SELECT i + 1 FROM c) SELECT i FROM c")
        assert "counter" not in db.views
        db.execute(f"CREATE VIEW walks AS {CYCLE_FOREVER}")  # converges while e is empty
        assert db.read("walks").column("n").to_pylist() == [1]
    finally:
        db.close()


def test_convergence_within_a_bound() -> None:
    """UNION converges on cycles however long the graph's paths; the count of iterations an
    epoch takes follows the longest new derivation, not the limit."""
    db = ivm.connect(iteration_limit=12)
    try:
        db.execute(";".join(TABLES) + "; CREATE VIEW reach AS " + VIEWS["reach"])
        db.ingest({"src": [{"id": 0}], "e": [{"s": i, "d": i + 1} for i in range(10)]
                   + [{"s": 10, "d": 0}]})
        assert sorted(db.read("reach").column("n").to_pylist()) == list(range(11))
        db.ingest("e", [{"s": 5, "d": 20}])
        assert 20 in db.read("reach").column("n").to_pylist()
    finally:
        db.close()


@pytest.mark.parametrize(("sql", "construct"), [
    ("WITH RECURSIVE r(x, y) USING KEY (x) AS (SELECT s, d FROM e UNION "
     "SELECT x, y + 1 FROM r WHERE y < 5) SELECT * FROM r", "USING KEY"),
    ("WITH RECURSIVE r(n) AS (SELECT id FROM src UNION SELECT n + 1 FROM r "
     "ORDER BY 1 LIMIT 3) SELECT * FROM r", "LIMIT"),
    ("WITH RECURSIVE r(n) AS (SELECT id FROM src UNION SELECT n FROM (SELECT n FROM r "
     "ORDER BY n LIMIT 1) t) SELECT * FROM r", "ORDER BY … LIMIT"),
    ("WITH RECURSIVE r(n, k) AS (SELECT id, 0 FROM src UNION SELECT n, ROW_NUMBER() OVER "
     "(ORDER BY n) FROM r WHERE k < 3) SELECT * FROM r", "window function"),
    ("WITH RECURSIVE r(n) AS (SELECT id FROM src UNION SELECT COUNT(*) FROM r "
     "WHERE n < 3) SELECT * FROM r", "aggregate without GROUP BY"),
    ("WITH RECURSIVE r(n) AS (SELECT id FROM src UNION SELECT n + 1 FROM r UNION ALL "
     "SELECT d FROM e) SELECT * FROM r", None),
])
def test_refused(sql: str, construct: str | None) -> None:
    db = ivm.connect()
    try:
        db.execute(";".join(TABLES))
        with pytest.raises(ivm.IvmError) as caught:
            db.execute(f"CREATE VIEW v AS {sql}")
        if construct is not None:
            assert construct in str(caught.value)
            assert isinstance(caught.value, ivm.UnsupportedSQL)
    finally:
        db.close()


def test_explain_shows_the_child_circuit() -> None:
    db = ivm.connect()
    try:
        db.execute(";".join(TABLES) + "; CREATE VIEW tc AS " + VIEWS["tc"])
        text = db.explain("tc")
        assert "FixedPoint r" in text
        assert "child circuit of r" in text
        assert "<- feedback edge" in text
    finally:
        db.close()


# tc and components run apart in each partition (by their invariant source and label, the
# edges copied to every partition), hops on one partition (its step changes every column).
SPARK_VIEWS = ["tc", "components", "hops"]


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_recursive_on_spark(data: st.DataObject, spark: Any,
                            tmp_path_factory: pytest.TempPathFactory) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    directory = tmp_path_factory.mktemp("spark-recursive")
    run_workload(TABLES, _views(SPARK_VIEWS), data, epochs=2, domains=DOMAINS, warmup=1,
                 max_ops=8, modes=("several",),
                 connect=lambda: ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS,
                                             iteration_limit=100))


def test_a_recursion_with_an_invariant_column_is_partitioned_by_it_on_spark(
        spark: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("spark-recursive-stages")
    db = ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS)
    try:
        db.execute(";".join(TABLES) + "".join(
            f"; CREATE VIEW {name} AS {VIEWS[name]}" for name in ("tc", "hops")))
        (tc,) = [line for line in db.explain("tc").splitlines() if "fixed_point-" in line]
        assert "in0 by [a]; in1 to every partition; integrals kept: in1; stores the view" in tc
        (hops,) = [line for line in db.explain("hops").splitlines() if "fixed_point-" in line]
        assert "in0 on one partition" in hops
        assert "(a recursive view's iterations run in one task)" in hops
    finally:
        db.close()

