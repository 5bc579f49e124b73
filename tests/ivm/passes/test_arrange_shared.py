"""ivm.passes.arrange_shared: a fused join read more than once is arranged (embedded mode).

Chains of LEFT / FULL joins and stacked NOT EXISTS read each level's result twice
(its inner join and its anti join); without arrangements the SQL of an epoch grows
as 2ⁿ with the chain's length. The tests pin where arrangements go, that the
epoch's SQL grows linearly, and that chains stay exact under random CDC.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle.harness import run_workload
from oracle.settings import RANDOM_CDC, examples

import ivm
from ivm.execution import embedded

TABLES = [f"CREATE TABLE t{i} (k INTEGER, v INTEGER)" for i in range(5)]
DOMAINS = {f"t{i}.{c}": (None, 0, 1, 2) for i in range(5) for c in "kv"}


def left_chain(n: int, side: str = "LEFT") -> str:
    joins = " ".join(f"{side} JOIN t{i} ON t{i}.k = t{i - 1}.k" for i in range(1, n + 1))
    return f"SELECT * FROM t0 {joins}"


CHAINS = {
    "left4": left_chain(4),
    "full3": left_chain(3, "FULL"),
    "mixed": "SELECT * FROM t0 LEFT JOIN t1 ON t1.k = t0.k JOIN t2 ON t2.v = t0.v "
             "RIGHT JOIN t3 ON t3.k = t1.k LEFT JOIN t4 ON t4.k = t3.v",
    "not_exists3": "SELECT * FROM t0 WHERE NOT EXISTS (SELECT 1 FROM t1 WHERE t1.k = t0.k) "
                   "AND NOT EXISTS (SELECT 1 FROM t2 WHERE t2.k = t0.v) "
                   "AND NOT EXISTS (SELECT 1 FROM t3 WHERE t3.v = t0.k)",
    "same_from": "SELECT (SELECT COUNT(*) FROM t1, t2 WHERE t1.k = t2.k AND t1.v = 1) AS a, "
                 "(SELECT SUM(t2.v) FROM t1, t2 WHERE t1.k = t2.k AND t1.v = 2) AS b, "
                 "(SELECT COUNT(*) FROM t1, t2 WHERE t1.k = t2.v OR t2.v = 0) AS c FROM t0",
}


@settings(RANDOM_CDC, max_examples=examples(3))
@given(data=st.data())
def test_chains_stay_exact(data: st.DataObject) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    run_workload(TABLES, CHAINS, data, epochs=6, domains=DOMAINS,
                 modes=("one", "several", "several"))


def _arrangements(db: ivm.Session, view: str) -> int:
    """Arrangements in the view's circuit (``explain`` shows each operator once)."""
    return db.explain(view).count("Arrangement (state")


def test_only_shared_fused_joins_are_arranged() -> None:
    with ivm.connect() as db:
        db.execute("; ".join(TABLES))
        db.execute(f"CREATE VIEW one AS {left_chain(1)}")
        db.execute(f"CREATE VIEW two AS {left_chain(2)}")
        db.execute(f"CREATE VIEW four AS {left_chain(4)}")
        db.execute("CREATE VIEW inner3 AS SELECT * FROM t0 JOIN t1 ON t0.k = t1.k "
                   "JOIN t2 ON t1.k = t2.k")
        # A single outer join reads base tables twice: their traces are tables already.
        assert _arrangements(db, "one") == 0 and _arrangements(db, "inner3") == 0
        assert _arrangements(db, "two") == 1 and _arrangements(db, "four") == 3


def test_filters_of_one_shared_join_make_joins_of_their_own() -> None:
    # Three subqueries over the same FROM read one cross product, each under its own
    # WHERE: arranging the product would store all of it (TPC-DS q88 held gigabytes).
    with ivm.connect() as db:
        db.execute("; ".join(TABLES))
        db.execute(f"CREATE VIEW v AS {CHAINS['same_from']}")
        assert _arrangements(db, "v") == 0
        assert db.explain(v := "v").count("DeltaJoin of 2 inputs on \"t1.k\" = \"t2.k\"") == 2, (
            db.explain(v))


@contextmanager
def statement_sizes() -> Iterator[list[int]]:
    sizes: list[int] = []
    run = embedded.run_sql

    def spy(con: object, sql: str, *names: Any) -> int:
        sizes.append(len(sql))
        return run(con, sql, *names)  # type: ignore[arg-type]

    embedded.run_sql = spy
    try:
        yield sizes
    finally:
        embedded.run_sql = run


def test_the_sql_of_an_epoch_grows_linearly_with_the_chain() -> None:
    longest = {}
    for n in (2, 4):
        with ivm.connect() as db:
            db.execute("; ".join(TABLES))
            db.execute(f"CREATE VIEW v AS {left_chain(n)}")
            with statement_sizes() as sizes:
                db.ingest({f"t{i}": [{"k": 1, "v": i}] for i in range(n + 1)})
            longest[n] = max(sizes)
    # Without arrangements the longest statement grows ~4x per join (2 -> 4: ~20x).
    assert longest[4] < 2 * longest[2], longest
