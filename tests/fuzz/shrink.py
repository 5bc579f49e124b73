"""Shrink a failing query: drop clauses (and epochs) while it still fails the same way.

``shrink(ddl, queries, epochs, signature)`` takes the queries of a failing run (one, or
several when the failure shows only beside other views), the epochs that led to it and
the failure's ``signature`` (its outcome and the first words of its detail); it tries,
over and over until none applies, to drop a CTE, a WHERE / HAVING / QUALIFY / ORDER BY /
LIMIT / OFFSET / GROUP BY / DISTINCT, a join, a SELECT item, a side of AND / OR or of a
set operation, or replace an expression by one of its operands, keeping each change
DuckDB accepts after which the failure stays; then drops epochs the same way.

    python tests/fuzz/shrink.py 1048 1055     # group's first seed, the failing seed

re-runs the group of ``campaign.GROUP`` seeds from the first one (the same epochs), then
shrinks the failing seed's query (with the others of its group when it fails only
beside them) and prints the queries and epochs left.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path[:0] = [str(Path(__file__).resolve().parents[1]),
                    str(Path(__file__).resolve().parents[2])]

import duckdb
import sqlglot
from oracle.harness import Epoch
from sqlglot import expressions as exp

from fuzz.driver import Drive, Outcome, Result

Signature = tuple[Outcome, str]


def signature(result: Result) -> Signature:
    """A failure's outcome and the first words of its detail (error class and message
    start), which a shrunk query must keep."""
    return result.outcome, " ".join(result.detail.split()[:4])


def _variants(sql: str) -> Iterator[str]:
    """Each query one simplification away from ``sql``."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    nodes = list(tree.walk())
    removable = (exp.Where, exp.Having, exp.Qualify, exp.Order, exp.Limit, exp.Offset,
                 exp.Group, exp.Distinct, exp.Join, exp.CTE)
    for i, node in enumerate(nodes):
        if isinstance(node, removable) or (
                isinstance(node.parent, exp.Select) and node.arg_key == "expressions"
                and len(node.parent.expressions) > 1):
            copy = tree.copy()
            list(copy.walk())[i].pop()
            yield copy.sql(dialect="duckdb")
    for i, node in enumerate(nodes):
        if isinstance(node, (exp.Union, exp.Intersect, exp.Except, exp.And, exp.Or,
                             exp.Binary, exp.Case, exp.Coalesce, exp.Func, exp.Paren,
                             exp.Not, exp.Subquery)) and node is not tree:
            for side in ("this", "expression"):
                part = node.args.get(side)
                if isinstance(part, exp.Expression):
                    copy = tree.copy()
                    target = list(copy.walk())[i]
                    target.replace(target.args[side].copy())
                    yield copy.sql(dialect="duckdb")
    if isinstance(tree, (exp.Union, exp.Intersect, exp.Except)):
        yield tree.this.sql(dialect="duckdb")
        yield tree.expression.sql(dialect="duckdb")


def _fails(ddl: Sequence[str], queries: dict[str, str], epochs: Sequence[Epoch],
           want: Signature, warmup: int) -> bool:
    results = Drive(ddl, queries, lambda _h, i: epochs[i], len(epochs) - warmup,
                    warmup=warmup).run()
    return any(signature(r) == want for r in results.values())


def shrink(ddl: Sequence[str], queries: dict[str, str], epochs: Sequence[Epoch],
           want: Signature, warmup: int = 1, log: Callable[[str], None] = print
           ) -> tuple[dict[str, str], list[Epoch]]:
    """The smallest queries and epochs found that still fail with ``want``."""
    check = duckdb.connect()
    for statement in ddl:
        check.execute(statement)
    queries, epochs = dict(queries), list(epochs)
    changed = True
    while changed:
        changed = False
        for name in list(queries) if len(queries) > 1 else ():
            trial = {n: q for n, q in queries.items() if n != name}
            if _fails(ddl, trial, epochs, want, warmup):
                queries, changed = trial, True
                log(f"dropped {name}")
        for name in list(queries):
            seen = set()
            for variant in _variants(queries[name]):
                if variant in seen or len(variant) >= len(queries[name]):
                    continue
                seen.add(variant)
                try:
                    check.execute(f"EXPLAIN {variant}")
                except duckdb.Error:
                    continue
                trial = dict(queries, **{name: variant})
                if _fails(ddl, trial, epochs, want, warmup):
                    queries, changed = trial, True
                    log(f"{name}: {variant}")
                    break
    i = len(epochs) - 1
    while i >= 0:
        trial = epochs[:i] + epochs[i + 1:]
        w = warmup - 1 if i < warmup else warmup
        if _fails(ddl, queries, trial, want, w):
            epochs, warmup = trial, w
            log(f"dropped epoch {i}")
        i -= 1
    check.close()
    return queries, epochs


def main(argv: Sequence[str]) -> None:
    from fuzz.campaign import GROUP, run_seeds
    from fuzz.generator import DDL

    first, failing = int(argv[0]), int(argv[1])
    seeds = range(first, first + GROUP)
    results = {r.name: r for r in run_seeds(seeds)[0]}
    target = results[f"seed {failing}"]
    print(f"{target.name}: {target.outcome}: {target.detail[:300]}")
    if "only beside other views" in target.detail:
        queries = {n: r.sql for n, r in results.items() if "only beside" in r.detail}
        history = max((r.history for r in results.values()), key=len)
        alone = Drive(DDL, queries, lambda _h, i: history[i], len(history) - 1, warmup=1)
        target = next(r for r in alone.run().values() if r.outcome != Outcome.EXACT)
    else:
        queries = {target.name: target.sql}
    queries, epochs = shrink(DDL, queries, target.history, signature(target))
    print("--- shrunk")
    for name, sql in queries.items():
        print(f"{name}: {sql}")
    for epoch in epochs:
        print(repr(epoch))


if __name__ == "__main__":
    main(sys.argv[1:])
