"""Benchmark: recursive views (WITH RECURSIVE) against DuckDB recomputing them.

Two views, each in its own session over its own graph in ``e (s, d)`` (no key,
duplicate edges allowed), 100k edges by default:

* ``reach``: the nodes reachable from 10 source nodes (``src``), over a random
  sparse directed graph (``--edges`` edges between ``--nodes`` nodes, both ends
  uniform; with the default of two edges per node most nodes are reachable);
* ``tc``: the transitive closure, over a forest-like DAG whose closure stays small
  (in blocks of ``--block`` nodes, each edge goes from a node to one of the next
  ``--window`` nodes of its block): the closure of a random graph with a giant
  strongly connected component is quadratic, and no way of computing it is feasible.

The view's first contents are timed two ways against DuckDB's one-off query: one
``db.ingest`` of every edge into a session where the view is already defined, and
``CREATE VIEW`` over edges already loaded (its backfill). Then, ``--repeats`` times
each: one random edge in, one existing edge out (one copy), and a batch of
``--batch`` edges (half new, half existing ones out). The incremental time is the
whole ``db.ingest`` call; the baseline is DuckDB running the same recursive query
from scratch (``CREATE OR REPLACE TABLE … AS``) over plain tables holding the same
edges, in the same process (a separate ``duckdb.connect()``; applying the change
to those tables is not timed). Printed: median times and the ratio recompute / ivm
(no assertion on them), the median number of view rows each change moved, and the
rows the view's state holds (its operators' traces, stored and of non-zero weight)
against its output rows. ``--profile`` prints ``db.explain(view, analyze=True)`` for
the slowest epoch of each kind. At the end each view must equal recomputation.
``--spark P`` runs ivm in Spark mode (``local[2]``, P partitions; no state table): ``tc``'s
fixed point is then partitioned by its source, ``reach``'s runs on one partition.

    .venv/bin/python benchmarks/bench_recursive.py [--edges 100000] [--nodes 50000]
        [--repeats 5] [--batch 1000] [--views reach,tc] [--quick] [--profile] [--spark P]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa
from bench_aggregate import difference
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import ivm

DDL = "CREATE TABLE e (s BIGINT, d BIGINT); CREATE TABLE src (id BIGINT)"
VIEWS = {
    "reach": (
        "WITH RECURSIVE r(n) AS (SELECT id FROM src UNION "
        "SELECT e.d FROM r JOIN e ON r.n = e.s) SELECT n FROM r"
    ),
    "tc": (
        "WITH RECURSIVE r(a, b) AS (SELECT s, d FROM e UNION "
        "SELECT r.a, e.d FROM r JOIN e ON r.b = e.s) SELECT a, b FROM r"
    ),
}
SOURCES = 10
"""Source nodes of ``reach``."""
CONNECT: Callable[[], ivm.Session] = ivm.connect
"""Opens an ivm session (``--spark``: a Spark-mode one in a new directory)."""
SEED = 11


class Graph:
    """The live edges of one view's graph, and random changes to them (vectorized)."""

    def __init__(self, draw: Callable[[np.random.Generator, int], np.ndarray], edges: int,
                 rng: np.random.Generator) -> None:
        self.draw = draw
        self.rng = rng
        self.edges = draw(rng, edges)  # (n, 2): one edge per row

    def table(self) -> pa.Table:
        """The live edges as a table of ``e``."""
        return pa.table({"s": pa.array(self.edges[:, 0], pa.int64()),
                         "d": pa.array(self.edges[:, 1], pa.int64())})

    def change(self, inserts: int, deletes: int) -> pa.Table:
        """A batch inserting ``inserts`` new random edges and deleting ``deletes`` live ones
        (one copy each); updates the live edges."""
        picked = self.rng.choice(len(self.edges), deletes, replace=False)
        old = self.edges[picked]
        new = self.draw(self.rng, inserts)
        keep = np.ones(len(self.edges), dtype=bool)
        keep[picked] = False
        self.edges = np.concatenate([self.edges[keep], new])
        rows = np.concatenate([old, new])
        weights = np.concatenate([np.full(deletes, -1), np.ones(inserts)]).astype(np.int64)
        return pa.table({"s": pa.array(rows[:, 0], pa.int64()),
                         "d": pa.array(rows[:, 1], pa.int64()),
                         "__w": pa.array(weights)})


def random_edges(nodes: int) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Edges with both ends uniform over ``nodes`` nodes (cycles, self-loops, duplicates)."""
    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(0, nodes, (n, 2))
    return draw


def block_dag_edges(nodes: int, block: int,
                    window: int) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Edges from a node to one of the next ``window`` nodes of its block of ``block``
    nodes: a DAG of ``nodes // block`` components, each's closure at most block²/2 pairs."""
    blocks = max(nodes // block, 1)

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        first = rng.integers(0, blocks, n) * block
        position = rng.integers(0, block - 1, n)
        reach = np.minimum(window, block - 1 - position)
        offset = 1 + (rng.random(n) * reach).astype(np.int64)
        return np.stack([first + position, first + position + offset], axis=1)
    return draw


@dataclass
class Timings:
    """One kind of change, repeated: ivm's epochs, DuckDB's recomputations, rows moved."""

    ivm: list[float] = field(default_factory=list)
    recompute: list[float] = field(default_factory=list)
    moved: list[int] = field(default_factory=list)
    slowest: str = ""
    """``explain(analyze=True)`` after the slowest epoch (with ``--profile``)."""


def recompute_seconds(plain: duckdb.DuckDBPyConnection, sql: str) -> float:
    """Time DuckDB computing the view from scratch over its plain tables."""
    start = time.perf_counter()
    plain.execute(f"CREATE OR REPLACE TABLE recomputed AS {sql}")
    return time.perf_counter() - start


def load_plain(plain: duckdb.DuckDBPyConnection, edges: pa.Table) -> None:
    """Make the baseline's ``e`` hold ``edges`` (untimed: only the query is compared)."""
    plain.register("live_edges", edges)
    plain.execute("CREATE OR REPLACE TABLE e AS SELECT * FROM live_edges")
    plain.unregister("live_edges")


def state_rows(db: ivm.Session, view: str) -> dict[str, tuple[int, int]]:
    """Rows in each trace of the view's operators (tables ``__ivm_op_<view>#<role>-<fp>``),
    by role: all of them, whatever their weights (what is stored), and the distinct rows
    of non-zero total weight (what compaction would keep)."""
    prefix = f"__ivm_op_{view}#"
    names = db._con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE starts_with(table_name, ?) "
        "ORDER BY table_name", [prefix]
    ).fetchall()
    rows = {}
    for (name,) in names:
        role = name[len(prefix):].rsplit("-", 1)[0]
        stored, live = db._con.execute(
            f'SELECT (SELECT count(*) FROM "{name}"), (SELECT count(*) FROM (SELECT * '
            f'EXCLUDE (__w) FROM "{name}" GROUP BY ALL HAVING SUM(__w) <> 0))'
        ).fetchall()[0]
        rows[role] = (stored, live)
    return rows


def moved_rows(delta: pa.Table) -> int:
    """View rows a change inserted or deleted (the sum of its |weights|)."""
    return int(np.abs(delta["__w"].to_numpy()).sum()) if delta.num_rows else 0


Row = tuple[str, ...]
"""One line of a printed table."""


def timed_row(name: str, change: str, ivm_s: list[float], recompute_s: list[float],
              moved: list[int]) -> Row:
    """A line of the results table: medians (and ivm's slowest) over the repeats."""
    inc, rec = statistics.median(ivm_s), statistics.median(recompute_s)
    slowest = f"{max(ivm_s) * 1000:.1f}" if len(ivm_s) > 1 else ""
    return (name, change, f"{inc * 1000:.1f}", slowest, f"{rec * 1000:.1f}", f"{rec / inc:.2f}x",
            f"{statistics.median(moved):,.0f}")


def load(name: str, graph: Graph, sources: pa.Table,
         plain: duckdb.DuckDBPyConnection) -> tuple[ivm.Session, list[Row]]:
    """The view's first contents two ways, against DuckDB's one-off query: one ``ingest``
    of every edge into a session where the view is defined (the session kept), and
    ``CREATE VIEW`` over edges already loaded (its backfill, in a session of its own)."""
    sql = VIEWS[name]
    plain.execute(DDL)
    plain.register("sources", sources)
    plain.execute("INSERT INTO src SELECT * FROM sources")
    plain.unregister("sources")
    load_plain(plain, graph.table())
    once = recompute_seconds(plain, sql)
    other = CONNECT()
    other.execute(DDL)
    other.ingest({"e": graph.table(), "src": sources})
    start = time.perf_counter()
    other.execute(f"CREATE VIEW {name} AS {sql}")
    backfill = time.perf_counter() - start
    backfilled = other.read(name).num_rows
    other.close()
    db = CONNECT()
    db.execute(f"{DDL}; CREATE VIEW {name} AS {sql}")
    start = time.perf_counter()
    db.ingest({"e": graph.table(), "src": sources})
    loaded = time.perf_counter() - start
    output = db.read(name).num_rows
    assert backfilled == output, f"{name}: backfill gave {backfilled} rows, the load {output}"
    return db, [
        timed_row(name, "initial load (one ingest, view defined)", [loaded], [once], [output]),
        timed_row(name, "CREATE VIEW over the edges (backfill)", [backfill], [once], [output]),
    ]


def graph_for(name: str, args: argparse.Namespace,
              rng: np.random.Generator) -> tuple[Graph, str]:
    """The view's graph and a description of its shape."""
    if name == "reach":
        return Graph(random_edges(args.nodes), args.edges, rng), (
            f"random graph, {args.nodes:,} nodes")
    draw = block_dag_edges(args.nodes, args.block, args.window)
    return Graph(draw, args.edges, rng), (
        f"block DAG: {args.nodes // args.block:,} blocks of {args.block} nodes, "
        f"edges to the next {args.window}")


def run_view(console: Console, name: str, args: argparse.Namespace) -> tuple[list, list]:
    """Load the view's graph, time its changes; rows for the results and state tables."""
    rng = np.random.default_rng(SEED)
    graph, shape = graph_for(name, args, rng)
    sources = pa.table({"id": pa.array(rng.choice(args.nodes, SOURCES, replace=False),
                                       pa.int64())})
    sql = VIEWS[name]
    plain = duckdb.connect()
    db, results = load(name, graph, sources, plain)
    console.print(f"{name}: {args.edges:,} edges ({shape}); "
                  f"{db.read(name).num_rows:,} rows in the view")

    half = args.batch // 2
    kinds = {"one edge in": (1, 0), "one edge out": (0, 1),
             f"{args.batch:,} edges ({half:,} in, {args.batch - half:,} out)":
             (half, args.batch - half)}
    for kind, (inserts, deletes) in kinds.items():
        timings = Timings()
        for _ in range(args.repeats):
            batch = graph.change(inserts, deletes)
            start = time.perf_counter()
            delta = db.ingest("e", batch)
            seconds = time.perf_counter() - start
            if args.profile and seconds > max(timings.ivm, default=0.0):
                timings.slowest = db.explain(name, analyze=True)
            timings.ivm.append(seconds)
            timings.moved.append(moved_rows(delta[name]))
            load_plain(plain, graph.table())
            timings.recompute.append(recompute_seconds(plain, sql))
        results.append(timed_row(name, kind, timings.ivm, timings.recompute, timings.moved))
        if args.profile:
            console.print(f"{name}, {kind}: the slowest epoch "
                          f"({max(timings.ivm) * 1000:.1f} ms)")
            console.print(escape(timings.slowest))

    problem = difference(db.read(name), plain.sql(sql).to_arrow_table())
    assert problem is None, f"{name} differs from recomputation: {problem}"
    console.print(f"{name}: equals recomputation after the run")
    state = [] if CONNECT is not ivm.connect else state_table_rows(
        name, state_rows(db, name), db.read(name).num_rows)
    db.close()
    plain.close()
    return results, state


def state_table_rows(name: str, traces: dict[str, tuple[int, int]], output: int) -> list[Row]:
    """Lines of the state table: each trace, then all of them against the output rows."""
    stored, live = (sum(rows[i] for rows in traces.values()) for i in (0, 1))
    lines = [(name, role, f"{rows[0]:,}", f"{rows[1]:,}", "") for role, rows in traces.items()]
    lines.append((name, "all traces", f"{stored:,} ({stored / max(output, 1):.2f}x)",
                  f"{live:,} ({live / max(output, 1):.2f}x)", f"{output:,}"))
    return lines


def spark_sessions(partitions: int) -> None:
    """Make ``CONNECT`` open Spark-mode sessions (``local[2]``), each in a new directory."""
    global CONNECT
    import os
    import tempfile

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("bench_recursive")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(partitions))
             .config("spark.python.unix.domain.socket.enabled", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    CONNECT = lambda: ivm.connect(tempfile.mkdtemp(), spark=spark,  # noqa: E731
                                  partitions=partitions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, help="default: 100000 (--quick: 10000)")
    parser.add_argument("--nodes", type=int, help="default: half the edges")
    parser.add_argument("--block", type=int, default=30, help="tc: nodes per DAG component")
    parser.add_argument("--window", type=int, default=5,
                        help="tc: an edge goes to one of the next WINDOW nodes")
    parser.add_argument("--repeats", type=int, help="default: 5 (--quick: 3)")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--views", default=",".join(VIEWS),
                        help=f"comma-separated, of: {', '.join(VIEWS)}")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: 10k edges, 3 repeats unless given")
    parser.add_argument("--profile", action="store_true",
                        help="print explain(analyze=True) of each kind's slowest epoch")
    parser.add_argument("--spark", type=int, metavar="P",
                        help="run ivm in Spark mode (local[2]) with P partitions")
    args = parser.parse_args()
    if args.spark:
        spark_sessions(args.spark)
    args.edges = args.edges or (10_000 if args.quick else 100_000)
    args.repeats = args.repeats or (3 if args.quick else 5)
    if args.nodes is None:
        args.nodes = max(args.edges // 2, SOURCES)
    names = args.views.split(",")
    if unknown := [n for n in names if n not in VIEWS]:
        parser.error(f"unknown views {unknown}; choose from {list(VIEWS)}")
    console = Console(width=None if sys.stdout.isatty() else 140)
    results, states = [], []
    for name in names:
        timed, state = run_view(console, name, args)
        results += timed
        states += state

    table = Table(title=f"ivm vs recompute, {args.edges:,} edges, "
                        f"median of {args.repeats} epochs")
    for column in ("view", "change", "ivm (ms)", "slowest (ms)", "recompute (ms)",
                   "speed-up", "view rows moved"):
        table.add_column(column, justify="left" if column in ("view", "change") else "right")
    for row in results:
        table.add_row(*row)
    console.print(table)
    table = Table(title="state: rows in the view's traces vs its output rows")
    for column in ("view", "trace", "rows stored", "rows of weight ≠ 0", "output rows"):
        table.add_column(column, justify="left" if column in ("view", "trace") else "right")
    for row in states:
        table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    main()
