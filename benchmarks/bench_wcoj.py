"""Benchmark: triangles over a graph with a skewed degree, three plans against DuckDB.

The graph: ``--edges`` random directed edges over ``--nodes`` nodes, plus one hub
with ``--hub`` out-edges and as many in-edges, so a binary plan's 2-paths through it
number ``--hub``² (1,000 → 1M). The views (directed, transitive triangles
a→b→c, a→c):

* ``listing``: every triangle (a, b, c);
* ``count``: ``COUNT(*)`` of them;
* ``cycle4`` (not by default: DuckDB's recomputation joins every 3-path): the number of
  directed 4-cycles, where the delta plan's rule for ``e1`` reads all of ``e3`` (no
  column links them) and the worst-case-optimal one reads ``e3`` at its prefixes (the
  binary plan runs it as the delta plan does).

Each plan runs in a session of its own over the same graph:

* ``wcoj``: the worst-case-optimal join (``db.join_plan = "wcoj"``; what ``"auto"``
  picks for these cyclic joins);
* ``delta``: today's n-way delta query (``db.join_plan = "binary"``): each rule reads
  the other inputs at the change's keys and hash-joins the slices;
* ``binary``: a binary plan as Feldera, Materialize or Spark maintain it: the 2-paths
  ``e1 ⋈ e2`` are a maintained view of their own (its state: every 2-path), joined
  with ``e3``.

Timed: the first load (``CREATE VIEW`` over the graph, against DuckDB's own query);
an epoch of one edge into the hub (``(x, hub)``: the binary plan gains ``--hub``
2-paths) and of it out again; an epoch of ``--batch`` edges (half new random edges,
a tenth of them at the hub, half deletions of present edges), in and out. The
baseline is DuckDB recomputing the view (``CREATE OR REPLACE TABLE … AS``) over a
plain table holding the same edges. Medians of ``--repeats``; ratios never asserted.
State: the bytes of the arrangements each session holds (the edges, the count
traces, the 2-paths), against the edges' own bytes. At the end every view must equal
recomputation.

    .venv/bin/python benchmarks/bench_wcoj.py [--nodes 20000] [--edges 200000]
        [--hub 1000] [--batch 1000] [--repeats 3] [--plans wcoj,delta,binary]
        [--views listing,count] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa

import ivm

TRIANGLES = (
    "FROM edges e1 JOIN edges e2 ON e1.dst = e2.src "
    "JOIN edges e3 ON e1.src = e3.src AND e2.dst = e3.dst"
)
VIEWS = {
    "listing": f"SELECT e1.src AS a, e1.dst AS b, e2.dst AS c {TRIANGLES}",
    "count": f"SELECT COUNT(*) AS n {TRIANGLES}",
    "cycle4": "SELECT COUNT(*) AS n FROM edges e1, edges e2, edges e3, edges e4 "
              "WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e4.src "
              "AND e4.dst = e1.src",
}
PATHS = ("SELECT e1.src AS a, e1.dst AS b, e2.dst AS c "
         "FROM edges e1 JOIN edges e2 ON e1.dst = e2.src")
OVER_PATHS = {
    "listing": "SELECT p.a, p.b, p.c FROM paths p JOIN edges e3 ON p.a = e3.src AND p.c = e3.dst",
    "count": "SELECT COUNT(*) AS n FROM paths p JOIN edges e3 ON p.a = e3.src AND p.c = e3.dst",
}
HUB = 0


def graph(nodes: int, edges: int, hub: int, rng: np.random.Generator) -> set[tuple[int, int]]:
    """Random edges without self-loops, and the hub's ``hub`` out- and in-edges."""
    src = rng.integers(1, nodes, edges)
    dst = rng.integers(1, nodes, edges)
    pairs = {(int(s), int(d)) for s, d in zip(src, dst, strict=True) if s != d}
    around = rng.choice(np.arange(1, nodes), size=2 * hub, replace=False)
    pairs |= {(HUB, int(n)) for n in around[:hub]}
    pairs |= {(int(n), HUB) for n in around[hub:]}
    return pairs


def table(pairs: list[tuple[int, int]], weight: int | None = None) -> pa.Table:
    """Edges as an Arrow batch (with ``__w`` when ``weight`` is given)."""
    columns = {"src": pa.array([p[0] for p in pairs], pa.int32()),
               "dst": pa.array([p[1] for p in pairs], pa.int32())}
    if weight is not None:
        columns["__w"] = pa.array([weight] * len(pairs), pa.int64())
    return pa.table(columns)


@dataclass
class Timings:
    """Seconds per measured step, by name."""

    seconds: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.seconds.setdefault(name, []).append(value)

    def median(self, name: str) -> float:
        return statistics.median(self.seconds[name])


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


class Plan:
    """One plan's session over the graph, with the views of ``views``."""

    def __init__(self, plan: str, views: list[str], edges: pa.Table) -> None:
        self.plan, self.views = plan, views
        self.db = ivm.connect()
        self.db.join_plan = "wcoj" if plan == "wcoj" else "binary"
        self.db.execute("CREATE TABLE edges (src INTEGER, dst INTEGER)")
        self.db.ingest("edges", edges)

    def create(self) -> float:
        """Seconds to create the views over the graph (their first load)."""
        def create() -> None:
            if self.plan == "binary":
                self.db.execute(f"CREATE VIEW paths AS {PATHS}")
            for name in self.views:
                sql = OVER_PATHS.get(name, VIEWS[name]) if self.plan == "binary" else VIEWS[name]
                self.db.execute(f"CREATE VIEW {name} AS {sql}")
        return timed(create)

    def state_bytes(self) -> int:
        return sum(a.bytes for a in self.db._arrangements.sizes())


class Recompute:
    """DuckDB over a plain table of the same edges, recomputing each view."""

    def __init__(self, edges: pa.Table) -> None:
        self.con = duckdb.connect()
        self.con.register("edges_in", edges)
        self.con.execute("CREATE TABLE edges AS SELECT * FROM edges_in")
        self.con.unregister("edges_in")

    def apply(self, inserted: list[tuple[int, int]], deleted: list[tuple[int, int]]) -> None:
        if inserted:
            self.con.executemany("INSERT INTO edges VALUES (?, ?)", inserted)
        if deleted:
            self.con.register("gone", table(deleted))
            self.con.execute("DELETE FROM edges WHERE (src, dst) IN (SELECT src, dst FROM gone)")
            self.con.unregister("gone")

    def query(self, name: str) -> float:
        return timed(lambda: self.con.execute(
            f"CREATE OR REPLACE TABLE result AS {VIEWS[name]}").fetchall())

    def rows(self, name: str) -> list[tuple]:
        return sorted(self.con.execute(VIEWS[name]).fetchall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--edges", type=int, default=200_000)
    parser.add_argument("--hub", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plans", default="wcoj,delta,binary")
    parser.add_argument("--views", default="listing,count")
    parser.add_argument("--quick", action="store_true", help="a small graph (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.edges, args.hub, args.batch, args.repeats = 2_000, 10_000, 100, 100, 1
    rng = np.random.default_rng(7)
    present = graph(args.nodes, args.edges, args.hub, rng)
    edges = table(sorted(present))
    views = args.views.split(",")
    print(f"graph: {len(present):,} edges over {args.nodes:,} nodes; hub degree {args.hub:,} "
          f"in and out ({args.hub ** 2:,} 2-paths through it); edges {edges.nbytes:,} bytes")
    recompute = Recompute(edges)
    for name in views:
        print(f"  DuckDB's own query, {name}: {recompute.query(name) * 1e3:,.0f} ms")

    sessions = {p: Plan(p, views, edges) for p in args.plans.split(",")}
    times = {p: Timings() for p in sessions}
    base = Timings()
    for plan, session in sessions.items():
        times[plan].add("first load", session.create())
    base.add("first load", sum(recompute.query(name) for name in views))

    outsiders = [int(n) for n in rng.integers(1, args.nodes, 10 * args.repeats)]
    for _ in range(args.repeats):
        x = next(n for n in outsiders if (n, HUB) not in present)
        outsiders.remove(x)
        inserted = [(x, HUB)]
        additions = set()
        while len(additions) < args.batch // 2:
            s, d = (int(v) for v in rng.integers(1, args.nodes, 2))
            if rng.random() < 0.1:
                s, d = (HUB, d) if rng.random() < 0.5 else (s, HUB)
            if s != d and (s, d) not in present and (s, d) != (x, HUB):
                additions.add((s, d))
        pool = sorted(present)
        removals = [pool[i] for i in rng.choice(len(pool), args.batch // 2, replace=False)]
        steps = [
            ("1 edge in", inserted, []),
            ("1 edge out", [], inserted),
            (f"{args.batch} edges in/out", sorted(additions), removals),
            (f"{args.batch} edges back", removals, sorted(additions)),
        ]
        for step, ins, dels in steps:
            batch = pa.concat_tables([table(ins, 1), table(dels, -1)])
            for plan, session in sessions.items():
                times[plan].add(step, timed(lambda s=session, b=batch: s.db.ingest("edges", b)))
            recompute.apply(ins, dels)
            base.add(step, sum(recompute.query(name) for name in views))

    print(f"\nmedian ms per epoch (views: {', '.join(views)}; DuckDB: recomputing them)")
    steps = list(base.seconds)
    header = f"{'step':<24}{'DuckDB':>10}" + "".join(f"{p:>10}" for p in sessions)
    print(header + "".join(f"{'x ' + p:>12}" for p in sessions))
    for step in steps:
        duck = base.median(step)
        line = f"{step:<24}{duck * 1e3:>10.1f}"
        line += "".join(f"{times[p].median(step) * 1e3:>10.1f}" for p in sessions)
        line += "".join(f"{duck / times[p].median(step):>12.1f}" for p in sessions)
        print(line)
    print("\narranged state (bytes; x the edges' bytes)")
    for plan, session in sessions.items():
        size = session.state_bytes()
        print(f"  {plan:<8}{size:>14,}  {size / edges.nbytes:>6.1f}x")

    for plan, session in sessions.items():
        for name in views:
            got = sorted(tuple(r.values()) for r in session.db.read(name).to_pylist())
            assert got == recompute.rows(name), f"{plan} {name} differs from DuckDB"
        session.db.close()
    print("\nevery view equals DuckDB's recomputation")


if __name__ == "__main__":
    main()
