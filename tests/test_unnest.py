"""UNNEST and table functions: flat maps (``ivm.operators.flat_map``), linear, no state.

UNNEST of LIST and STRUCT columns in FROM (WITH ORDINALITY, LEFT JOIN … ON) and in the
SELECT list (several calls zipped to the longest, ``unnest(struct)`` as columns,
``recursive := true``), ``generate_series`` / ``range`` with column or constant arguments,
``unnest(generate_series(…))``, ``string_split`` + unnest; random CDC epochs against
DuckDB's recomputation, hand-written edge cases (empty and NULL lists, NULL elements,
ordinality, lists of different lengths zipped), refusals by name, and Spark mode.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.harness import MODES, Epoch, Harness, run_workload
from oracle.rows import rows
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm
from ivm.circuit.incrementalize import incrementalize
from ivm.execution.embedded import describe
from ivm.execution.spark.stages import view_stages
from ivm.operators.flat_map import FlatMapOperator
from ivm.passes import optimize
from ivm.sql_frontend.planner import plan_query

DOCS = ("CREATE TABLE docs (id INTEGER PRIMARY KEY, tags VARCHAR[], nums INTEGER[], "
        "n INTEGER, csv VARCHAR, s STRUCT(a INTEGER, b VARCHAR))")
BAG = "CREATE TABLE bag (l INTEGER[], k INTEGER)"

DOMAINS = {
    # Frozen LIST and STRUCT values (tuples; tuples of (field, value) pairs).
    "docs.tags": (("a", "b"), (), ("a",), (None, "c"), ("b", "b", "a")),
    "docs.nums": ((1, 2, 3), (), (None,), (2,), (4, 5), (2, 2)),
    "docs.n": (0, 1, 2, 3, -1),
    "docs.csv": ("a,b", "", "c", "a,,b"),
    "docs.s": ((("a", 1), ("b", "x")), (("a", None), ("b", "y")), (("a", 2), ("b", None))),
    "bag.l": ((1, 2), (), (2,), (None, 1)),
}

VIEWS = {
    "tag_rows": "SELECT d.id, u.tag FROM docs d, unnest(d.tags) AS u(tag)",
    "tag_ordinals": "SELECT id, tag, i FROM docs, unnest(tags) WITH ORDINALITY AS u(tag, i)",
    "big_nums": "SELECT d.id, u.x FROM docs d LEFT JOIN unnest(d.nums) AS u(x) ON u.x > 1",
    "tag_counts": "SELECT tag, count(*) AS n FROM docs, unnest(docs.tags) AS u(tag) "
                  "GROUP BY tag",
    "zipped": "SELECT id, unnest(tags) AS tag, unnest(nums) AS num FROM docs",
    "struct_columns": "SELECT id, unnest(s) FROM docs",
    "series": "SELECT d.id, g.i FROM docs d, generate_series(1, d.n) AS g(i)",
    "ranged": "SELECT id, r FROM docs, range(n) AS r",
    "series_in_select": "SELECT id, unnest(generate_series(1, n)) AS i FROM docs",
    "parts": "SELECT id, unnest(string_split(csv, ',')) AS part FROM docs",
    "constant_join": "SELECT d.id, g.x FROM docs d JOIN generate_series(1, 3) AS g(x) "
                     "ON g.x <= d.n",
    "bag_items": "SELECT k, x FROM bag, unnest(bag.l) AS u(x)",
    "regrouped": "SELECT n, unnest(list(id ORDER BY id)) AS i FROM docs GROUP BY n",
    "distinct_tags": "SELECT DISTINCT unnest(tags) AS tag FROM docs",
    "top_nums": "SELECT id, unnest(nums) AS x FROM docs ORDER BY x DESC, id LIMIT 3",
    "flattened": "SELECT id, unnest([nums, [0]], recursive := true) AS x FROM docs",
    "tag_view": "SELECT tag, n FROM tag_counts WHERE n > 1",
    # Adjacency lists: reachability through a recursive step that unnests.
    "reach": "WITH RECURSIVE r(x) AS (SELECT k FROM bag UNION SELECT u.y FROM r, bag b, "
             "unnest(b.l) AS u(y) WHERE b.k = r.x) SELECT x FROM r",
    # Subqueries reading only the row: computed per row, not joined.
    "tagged_a": "SELECT id FROM docs WHERE EXISTS (SELECT 1 FROM unnest(docs.tags) AS u(t) "
                "WHERE u.t = 'a')",
    "num_sums": "SELECT id, (SELECT sum(x) FROM unnest(docs.nums) AS u(x)) AS s, "
                "2 IN (SELECT unnest(docs.nums)) AS has_two FROM docs",
}


@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_unnest_under_random_cdc(data: st.DataObject) -> None:
    run_workload([DOCS, BAG], VIEWS, data, epochs=10, domains=DOMAINS,
                 modes=(*MODES, "clear"))


def expect(*found: tuple) -> list[tuple]:
    """``found`` in the order ``rows`` sorts rows (NULL first in each column)."""
    return sorted(found, key=lambda t: tuple((v is not None, v) for v in t))


def _docs(*rows: tuple) -> Harness:
    harness = Harness([DOCS, BAG], DOMAINS)
    if rows:
        harness.apply(Epoch.of({"docs": [("insert", r) for r in rows]}))
    return harness


EDGE_ROWS = (
    (1, ("a", "b"), (1, 2, 3), 2, "a,b", (("a", 1), ("b", "x"))),
    (2, (), (), 0, "", None),  # empty lists: no rows
    (3, None, None, None, None, None),  # NULL lists: no rows
    (4, (None, "c"), (None,), -1, "a,,b", (("a", None), ("b", None))),  # NULL elements
)


def test_empty_and_null_lists_and_null_elements() -> None:
    harness = _docs(*EDGE_ROWS)
    try:
        names = ("tag_rows", "tag_ordinals", "big_nums", "zipped", "struct_columns", "series",
                 "parts")
        harness.create_views({n: VIEWS[n] for n in names})
        read = harness.db.read
        assert rows(read("tag_rows")) == expect((1, "a"), (1, "b"), (4, None), (4, "c"))
        assert rows(read("tag_ordinals")) == expect((1, "a", 1), (1, "b", 2), (4, None, 1),
                                              (4, "c", 2))
        # LEFT JOIN: a row whose list has nothing the ON accepts (or no list) once, padded.
        assert rows(read("big_nums")) == expect((1, 2), (1, 3), (2, None), (3, None), (4, None))
        # Zipped to the longest list, the shorter padded with NULL; both empty: no row.
        assert rows(read("zipped")) == expect((1, "a", 1), (1, "b", 2), (1, None, 3),
                                        (4, None, None), (4, "c", None))
        assert read("struct_columns").column_names == ["id", "a", "b"]
        assert rows(read("struct_columns")) == expect((1, 1, "x"), (2, None, None), (3, None, None),
                                                (4, None, None))
        assert rows(read("series")) == expect((1, 1), (1, 2))
        assert rows(read("parts")) == expect((1, "a"), (1, "b"), (2, ""), (4, ""), (4, "a"),
                                       (4, "b"))
        harness.apply(Epoch.of({"docs": [
            ("update", EDGE_ROWS[0], (1, ("z",), (5,), 1, "q", None)),
            ("delete", EDGE_ROWS[3]),
        ]}))
        assert rows(read("tag_rows")) == expect((1, "z"))
        assert rows(read("zipped")) == expect((1, "z", 5))
    finally:
        harness.close()


def test_a_flat_map_keeps_no_state_and_changes_with_its_rows() -> None:
    harness = _docs(*EDGE_ROWS)
    try:
        harness.create_views({"tag_rows": VIEWS["tag_rows"], "zipped": VIEWS["zipped"]})
        text = harness.db.explain("tag_rows")
        # Only the base table and the view keep state: the flat map none.
        stateful = [line for line in text.splitlines() if "trace" in line]
        assert [line for line in text.splitlines() if "FlatMap" in line], text
        assert all("FlatMap" not in line for line in stateful), text
        deltas = harness.db.ingest("docs", [{"id": 9, "tags": ["x", "x"], "nums": [7],
                                             "n": 1, "csv": "", "s": None}])
        assert rows(deltas["tag_rows"]) == expect((9, "x", 2))  # one row, weight 2: consolidated
        assert rows(deltas["zipped"]) == expect((9, "x", None, 1), (9, "x", 7, 1))
    finally:
        harness.close()


def test_constant_table_functions_are_constant_relations() -> None:
    with ivm.connect() as db:
        db.execute(f"{DOCS}; CREATE VIEW nums AS SELECT * FROM generate_series(1, 3); "
                   "CREATE VIEW ords AS SELECT * FROM range(2) WITH ORDINALITY; "
                   "CREATE VIEW rows2 AS SELECT * FROM repeat_row(1, 'a', num_rows := 2); "
                   "CREATE VIEW words AS SELECT unnest(['x', 'y']) AS w")
        assert rows(db.read("nums")) == expect((1,), (2,), (3,))
        assert db.read("nums").column_names == ["generate_series"]
        assert db.read("ords").column_names == ["range", "ordinality"]
        assert rows(db.read("ords")) == expect((0, 1), (1, 2))
        assert rows(db.read("rows2")) == expect((1, "a"), (1, "a"))
        assert rows(db.read("words")) == expect(("x",), ("y",))
        deltas = db.ingest("docs", [{"id": 1, "tags": [], "nums": [], "n": 1, "csv": "",
                                     "s": None}])
        assert all(d.num_rows == 0 for d in deltas.values())


@pytest.mark.parametrize(("sql", "construct"), [
    ("SELECT * FROM read_parquet('x.parquet')", "table function read_parquet"),
    ("SELECT * FROM docs, read_csv('x.csv')", "table function read_csv"),
    ("SELECT * FROM glob('*')", "table function glob"),
    ("SELECT * FROM duckdb_tables()", "table function duckdb_tables"),
    ("SELECT * FROM docs d, repeat(d.id, 2)", "table function repeat"),
    ("SELECT * FROM docs d RIGHT JOIN unnest(d.nums) AS u(x) ON true",
     "RIGHT JOIN of a lateral item"),
    ("SELECT DISTINCT ON (id) id, unnest(nums) AS x FROM docs ORDER BY id, x",
     "UNNEST with DISTINCT ON"),
    ("SELECT id, unnest(s) FROM docs ORDER BY id LIMIT 2", "UNNEST of a STRUCT with ORDER BY"),
])
def test_what_is_refused_is_named(sql: str, construct: str) -> None:
    with ivm.connect() as db:
        db.execute(DOCS)
        with pytest.raises(ivm.UnsupportedSQL, match=construct):
            db.execute(f"CREATE VIEW v AS {sql}")


SPARK = ["zipped", "tag_counts"]


@settings(RANDOM_CDC, max_examples=examples(1))
@given(data=st.data())
def test_unnest_on_spark(data: st.DataObject, spark: Any,
                         tmp_path_factory: pytest.TempPathFactory) -> None:
    # The flat map is linear: it runs inside the Spark tasks of the stage that reads it
    # (or of the view's output), each partition expanding its own rows.
    directory = tmp_path_factory.mktemp("spark-unnest")
    ddl = DOCS.replace(", s STRUCT(a INTEGER, b VARCHAR)", "")  # Spark carries no STRUCT
    domains = {k: v for k, v in DOMAINS.items() if k != "docs.s"}
    run_workload([ddl], {n: VIEWS[n] for n in SPARK}, data, epochs=3, domains=domains,
                 connect=lambda: ivm.connect(directory, spark=spark,
                                             partitions=SPARK_PARTITIONS))


def _stages(sql: str) -> list[Any]:
    """The Spark stages of a view over ``docs`` (no Spark session: stage cutting only)."""
    con = duckdb.connect()
    con.execute(DOCS.replace(", s STRUCT(a INTEGER, b VARCHAR)", ""))
    relations = {"docs": describe(con, "SELECT * FROM docs")}
    plan = plan_query(sql, relations, lambda q: describe(con, q))
    circuit = incrementalize(plan, "v", lambda q: describe(con, q))
    return view_stages(optimize(circuit, partitioned=True))


def _feeds(stage: Any) -> list[Any]:
    """The one-input linear operators between a stage's first input and the stage before
    it (or a source): what Spark tasks compute on the way in."""
    op, chain = stage.inputs[0].stream, []
    while op is not None and op.linear and len(op.inputs) == 1:
        chain.append(op)
        op = op.inputs[0]
    return chain


def test_a_flat_map_runs_in_the_spark_tasks_feeding_a_stage() -> None:
    # Linear, it is no stage of its own: the tasks of the linear chain in front of the
    # stage reading it expand each partition's rows (mapInArrow), before the exchange.
    for view, kind in (("tag_counts", "aggregate-"), ("zipped", "output-")):
        (stage,) = _stages(VIEWS[view].replace("docs.tags", "tags"))
        assert stage.name.startswith(kind) and stage.contents
        assert any(isinstance(op, FlatMapOperator) for op in _feeds(stage)), stage
