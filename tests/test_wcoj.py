"""Worst-case-optimal joins (``ivm.operators.generic_join``) under random CDC and by hand.

Cyclic joins (triangles, 4-cycles, a 4-clique, self-joins of one edges table, three
tables with extra columns and filters) are checked against DuckDB after every epoch
(tests/oracle/harness.py). The domains are small, so rows are duplicated, NULL join
keys appear, and every role of a self-joined table changes in one epoch.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.harness import Epoch, Harness, run_workload
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

EDGES = "CREATE TABLE edges (src INTEGER, dst INTEGER)"
R = "CREATE TABLE r (a INTEGER, b INTEGER, x VARCHAR)"
S = "CREATE TABLE s (b INTEGER, c INTEGER, y INTEGER)"
T = "CREATE TABLE t (c INTEGER, a INTEGER)"
NODES = (1, 2, 3, 4, None)
DOMAINS = {"edges.src": NODES, "edges.dst": NODES, "r.a": NODES, "r.b": NODES,
           "s.b": NODES, "s.c": NODES, "t.c": NODES, "t.a": NODES,
           "r.x": ("p", "q"), "s.y": (0, 1, 2)}

TRIANGLE = ("SELECT e1.src AS a, e1.dst AS b, e2.dst AS c FROM edges e1 "
            "JOIN edges e2 ON e1.dst = e2.src JOIN edges e3 ON e2.dst = e3.dst "
            "AND e1.src = e3.src")
SELF_JOINS = {
    "triangle": TRIANGLE,
    "triangle_count": "SELECT COUNT(*) AS n FROM edges e1, edges e2, edges e3 "
                      "WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e1.src",
    "undirected_4cycle": "SELECT e1.src, e2.src AS b, e3.src AS c, e4.src AS d "
                         "FROM edges e1, edges e2, edges e3, edges e4 "
                         "WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e4.src "
                         "AND e4.dst = e1.src",
    "directed_4cycle_filtered": "SELECT e1.src, e3.src AS c FROM edges e1 "
                                "JOIN edges e2 ON e1.dst = e2.src "
                                "JOIN edges e3 ON e2.dst = e3.src "
                                "JOIN edges e4 ON e3.dst = e4.src AND e4.dst = e1.src "
                                "WHERE e1.src < e2.src",
}
CLIQUE = {
    "clique4": "SELECT e1.src AS a, e1.dst AS b, e2.dst AS c, e3.dst AS d FROM edges e1 "
               "JOIN edges e2 ON e2.src = e1.src JOIN edges e3 ON e3.src = e1.src "
               "JOIN edges e4 ON e4.src = e1.dst AND e4.dst = e2.dst "
               "JOIN edges e5 ON e5.src = e1.dst AND e5.dst = e3.dst "
               "JOIN edges e6 ON e6.src = e2.dst AND e6.dst = e3.dst",
}
THREE_TABLES = {
    "rst": "SELECT r.a, r.b, s.c, r.x, s.y FROM r JOIN s ON r.b = s.b "
           "JOIN t ON s.c = t.c AND t.a = r.a",
    "rst_filtered": "SELECT r.x, s.y, t.c FROM r, s, t WHERE r.b = s.b AND s.c = t.c "
                    "AND t.a = r.a AND s.y > 0 AND r.x <> 'q' AND r.a + s.y < 6",
    "rst_grouped": "SELECT r.x, COUNT(*) AS n, SUM(s.y) AS sy FROM r JOIN s ON r.b = s.b "
                   "JOIN t ON s.c = t.c AND t.a = r.a GROUP BY r.x",
}


@pytest.mark.parametrize("views", [SELF_JOINS, CLIQUE], ids=["self_joins", "clique"])
@RANDOM_CDC
@given(data=st.data())
def test_self_joined_cycles_random_cdc(views: dict[str, str], data: st.DataObject) -> None:
    run_workload([EDGES], views, data, epochs=12, max_ops=8, domains=DOMAINS)


@RANDOM_CDC
@given(data=st.data())
def test_three_tables_random_cdc(data: st.DataObject) -> None:
    run_workload([R, S, T], THREE_TABLES, data, epochs=12, max_ops=6, domains=DOMAINS)


# --- scripted edges: each step checked against DuckDB ----------------------------------------

HAND_VIEWS = {
    "triangle": TRIANGLE,
    "cycle3": "SELECT e1.src AS a, e2.src AS b, e3.src AS c FROM edges e1, edges e2, edges e3 "
              "WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e1.src",
    "cycle4": SELF_JOINS["undirected_4cycle"],
}


def _edges(*pairs: tuple[int | None, int | None], op: str = "insert") -> Epoch:
    return Epoch.of({"edges": [(op, pair) for pair in pairs]})


def test_all_three_edges_of_a_triangle_in_one_batch() -> None:
    harness = Harness([EDGES], DOMAINS)
    try:
        harness.create_views(HAND_VIEWS)
        assert "WorstCaseOptimalJoin" in harness.db.explain("triangle")
        harness.apply(_edges((1, 2), (2, 3), (1, 3), (3, 1)))  # one triangle, one 3-cycle
        assert len(harness.db.read("triangle")) == 1
        assert len(harness.db.read("cycle3")) == 3  # (1,2,3) seen from each node
        harness.apply(_edges((1, 2), (2, 3), (1, 3)))  # duplicates: every output ×2 or ×4
        harness.apply(_edges((1, 2), (2, 3), (1, 3), (3, 1), op="delete"))  # out together
        harness.apply(_edges((1, 2), (2, 3), (1, 3), op="delete"))
        assert harness.db.read("triangle").num_rows == 0
    finally:
        harness.close()


def test_an_edge_and_its_reverse_together() -> None:
    harness = Harness([EDGES], DOMAINS)
    try:
        harness.apply(_edges((1, 2), (2, 1), (2, 3), (3, 2)))  # a view fills over these
        harness.create_views(HAND_VIEWS)
        harness.apply(_edges((1, 3), (3, 1)))  # closes the undirected triangle: both ways
        assert len(harness.db.read("cycle3")) == 6
        harness.apply(_edges((1, 1), (2, 2)))  # self-loops: one edge plays every role
        harness.apply(Epoch.of({"edges": [("delete", (1, 3)), ("insert", (4, 1)),
                                          ("insert", (3, 4)), ("update", (3, 1), (1, 4))]}))
        harness.apply(_edges((None, 1), (1, None), (4, 3)))  # NULL keys match nothing
        harness.apply(_edges((1, 2), (2, 1), (1, 1), op="delete"))
    finally:
        harness.close()


# --- choosing the plan -----------------------------------------------------------------------

PATH = "SELECT * FROM r JOIN s ON r.b = s.b JOIN t ON s.c = t.c"  # acyclic


def test_the_plan_follows_the_option_and_the_hints() -> None:
    with ivm.connect() as db:
        db.execute(f"{EDGES}; {R}; {S}; {T}")
        assert db.join_plan == "auto"
        db.execute(f"CREATE VIEW auto_cyclic AS {TRIANGLE}; CREATE VIEW auto_path AS {PATH}")
        hinted = TRIANGLE.replace("SELECT", "SELECT /*+ binary_join */", 1)
        db.execute(f"CREATE VIEW hinted_binary AS {hinted}")
        db.execute(f"CREATE VIEW hinted_wcoj AS {PATH.replace('SELECT', 'SELECT /*+ WCOJ */')}")
        db.join_plan = "binary"
        db.execute(f"CREATE VIEW option_binary AS {TRIANGLE}")
        db.join_plan = "wcoj"
        db.execute(f"CREATE VIEW option_wcoj AS {PATH}")
        generic = {name: "WorstCaseOptimalJoin" in db.explain(name) for name in db.views}
        assert generic == {"auto_cyclic": True, "auto_path": False, "hinted_binary": False,
                           "hinted_wcoj": True, "option_binary": False, "option_wcoj": True}
        db.ingest({"edges": [{"src": 1, "dst": 2}, {"src": 2, "dst": 3}, {"src": 1, "dst": 3}],
                   "r": [{"a": 1, "b": 2, "x": "p"}], "s": [{"b": 2, "c": 3, "y": 1}],
                   "t": [{"c": 3, "a": 1}]})
        for name in db.views:
            assert db.read(name).num_rows == 1, name
        with pytest.raises(ivm.IvmError, match="join_plan must be one of"):
            db.join_plan = "hash"


def test_explain_shows_rules_and_roles() -> None:
    with ivm.connect() as db:
        db.execute(f"{EDGES}; CREATE VIEW tri AS {TRIANGLE}")
        text = db.explain("tri")
    assert "attribute order: A0, A1, A2" in text
    assert text.count("rule Δin") == 3
    assert "extend A2: count in1[e2.src, e2.dst] by [A1], in2[e3.src, e3.dst] by [A0]" in text
    assert "the others validate (in1[e2.src, e2.dst] at [A1, A2]" in text


# --- Spark mode: the same operator, on one partition -----------------------------------------

@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_cyclic_joins_on_spark(data: st.DataObject, spark: Any,
                               tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("spark-wcoj")
    views = {"triangle": TRIANGLE, "rst_filtered": THREE_TABLES["rst_filtered"]}
    run_workload([EDGES, R, S, T], views, data, epochs=3, max_ops=6, domains=DOMAINS,
                 connect=lambda: ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS))
    with ivm.connect(directory, spark=spark) as db:
        text = db.explain("triangle")
    assert "WorstCaseOptimalJoin" in text and "partitioned: one place" in text


def test_a_cycle_closed_by_key_joins_keeps_todays_plan() -> None:
    # TPC-H Q5's shape: customers and suppliers of one nation, joined through orders and
    # lineitems. Every input but lineitem is keyed by a join attribute: nothing blows up.
    with ivm.connect() as db:
        db.execute("CREATE TABLE c (ck INTEGER PRIMARY KEY, nation INTEGER); "
                   "CREATE TABLE sp (sk INTEGER PRIMARY KEY, nation INTEGER); "
                   "CREATE TABLE o (ok INTEGER PRIMARY KEY, ck INTEGER); "
                   "CREATE TABLE l (ok INTEGER, sk INTEGER, qty INTEGER)")
        q5 = ("SELECT c.nation, SUM(l.qty) AS q FROM c, o, l, sp WHERE c.ck = o.ck "
              "AND o.ok = l.ok AND l.sk = sp.sk AND c.nation = sp.nation GROUP BY c.nation")
        db.execute(f"CREATE VIEW q5 AS {q5}")
        db.execute(f"CREATE VIEW q5_forced AS {q5.replace('SELECT', 'SELECT /*+ wcoj */')}")
        assert "WorstCaseOptimalJoin" not in db.explain("q5")
        assert "WorstCaseOptimalJoin" in db.explain("q5_forced")
