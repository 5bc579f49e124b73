"""Wide inner joins (ivm/passes/wide_joins.py): an epoch changing many inputs of an n-way
join costs O(n log n), not O(n²) (corpus finding F7: SQLite's select5 joins up to 64
tables, and 32 of 64 changed took 19 s of CPU), and such joins stay exact under random
CDC whatever the shape of their equalities (chain, tree, cycle, star, cross product).

Sizes are measured, never times: the SQL of the statements one epoch runs.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle.harness import run_workload
from oracle.settings import RANDOM_CDC
from test_scalar_subquery_scaling import spied

import ivm
from ivm.passes.wide_joins import WIDE


def chain_tables(n: int) -> list[str]:
    """``t1 … tn``, each ``(aK PRIMARY KEY, bK, xK)``: joined ``aK = b(K-1)``."""
    return [f"CREATE TABLE t{k} (a{k} INTEGER PRIMARY KEY, b{k} INTEGER, x{k} VARCHAR)"
            for k in range(1, n + 1)]


def chain(n: int) -> str:
    """select5's shape: n tables in one FROM, a chain of equalities in WHERE."""
    where = " AND ".join(f"a{k} = b{k - 1}" for k in range(2, n + 1))
    columns = ", ".join(f"x{k}" for k in range(1, n + 1))
    return f"SELECT {columns} FROM {', '.join(f't{k}' for k in range(1, n + 1))} WHERE {where}"


def epoch_sql(n: int) -> int:
    """SQL text one epoch runs when every other input of an n-way chain changes."""
    rng = random.Random(n)
    with ivm.connect() as db:
        db.execute(";".join(chain_tables(n)))
        db.ingest({f"t{k}": [{f"a{k}": i, f"b{k}": rng.randrange(10), f"x{k}": str(i)}
                             for i in range(10)] for k in range(1, n + 1)})
        db.execute(f"CREATE VIEW v AS {chain(n)}")
        with spied() as (ran, _):
            db.ingest({f"t{k}": [{f"a{k}": 20, f"b{k}": rng.randrange(10), f"x{k}": "new"}]
                       for k in range(1, n + 1, 2)})
            return sum(ran)


def test_an_epoch_changing_half_the_inputs_grows_as_n_log_n() -> None:
    cost = {n: epoch_sql(n) for n in (16, 32, 64)}
    early = (cost[32] - cost[16]) / 16
    late = (cost[64] - cost[32]) / 32
    # n log n: the cost of one more input grows by a sixth from 16..32 to 32..64;
    # the delta query's k terms of n inputs each doubled it.
    assert 0 < late <= 1.4 * early, cost


def test_the_join_is_a_balanced_tree() -> None:
    with ivm.connect() as db:
        db.execute(";".join(chain_tables(32)))
        db.execute(f"CREATE VIEW v AS {chain(32)}")
        text = db.explain("v")
        assert "DeltaJoin of 2 inputs" in text, text
        assert "of 32 inputs" not in text and "Filter" not in text, text



def chain_row(k: int, i: int, w: int = 1) -> dict:
    """Row ``i`` of ``tk`` (key ``i``, joined to row ``i`` of the next table), weight ``w``."""
    return {f"a{k}": i, f"b{k}": i, f"x{k}": str(i), "__w": w}


def joined_chain(db: ivm.Session, n: int) -> None:
    """An n-way chain of 10-row tables whose rows ``i`` all join, as view ``v``."""
    db.execute(";".join(chain_tables(n)))
    db.ingest({f"t{k}": [chain_row(k, i) for i in range(10)] for k in range(1, n + 1)})
    db.execute(f"CREATE VIEW v AS {chain(n)}")


def test_retracted_rows_do_not_multiply_up_the_tree() -> None:
    """A trace holds a row deleted and inserted again as +1, -1, +1 until compaction; a
    join of such traces holds 3ⁿ rows for one across n of them, and each level of the
    tree read its inputs' joins so (select5, a 57-table join after deletes: 1.4M rows
    for one, an epoch estimated at hours). Each level consolidates: the rows its
    statements write stay as many as the live ones (729 + 9 written before)."""
    with ivm.connect() as db:
        joined_chain(db, 16)
        for w in (-1, 1):  # key 5 deleted and inserted again in t3 … t8
            db.ingest({f"t{k}": [chain_row(k, 5, w)] for k in range(3, 9)})
        db.ingest({"t1": [{"a1": 99, "b1": 5, "x1": "new"}]})  # joins key 5 throughout
        written = [s.rows for s in db.last_profile.operators.values()]
        assert db.sql("SELECT count(*) AS n FROM v WHERE x1 = 'new'")["n"][0].as_py() == 1
    assert sum(written) <= 2 * len(written), written


def test_a_levels_change_is_consolidated_before_the_level_above_reads_it() -> None:
    """An epoch deleting joined rows from every input: each term of a level reads the
    earlier inputs' new versions as old rows plus their change, so a deleted row comes
    as +1 and -1, and the level's change holds pairs that cancel, doubling at every
    level up (select5: 22,401 rows summing to one row, joined with 8,764 summing to ten,
    an epoch of 10 s). Each level's change is consolidated when it is stored, so every
    statement writes a handful of rows (6 at most; 510 unconsolidated)."""
    with ivm.connect() as db:
        joined_chain(db, 16)
        db.ingest({f"t{k}": [chain_row(k, 5, -1)] for k in range(1, 17)})
        written = [s.rows for s in db.last_profile.operators.values()]
        assert db.sql("SELECT count(*) AS n FROM v")["n"][0].as_py() == 9
    assert max(written) <= 10, written


# --- exact under random CDC ------------------------------------------------------------

N = WIDE + 2
TABLES = chain_tables(N)
DOMAINS = {**{f"t{k}.a{k}": (0, 1, 2, 3) for k in range(1, N + 1)},
           **{f"t{k}.b{k}": (None, 0, 1, 2, 3) for k in range(1, N + 1)},
           **{f"t{k}.x{k}": (None, "p", "q") for k in range(1, N + 1)}}
FROM = ", ".join(f"t{k}" for k in range(1, N + 1))
CHAIN = " AND ".join(f"a{k} = b{k - 1}" for k in range(2, N + 1))

VIEWS = {
    "chain": chain(N),
    # conditions across the halves, on one table, and constant
    "chain_more": f"SELECT x1, x{N}, b7 FROM {FROM} WHERE {CHAIN} AND x1 <= x{N} "
                  f"AND b3 IS NOT NULL AND x2 <> 'q' AND 1 = 1",
    # a cycle: the last table joins back to the first
    "cycle": f"SELECT a1, x5, x{N} FROM {FROM} WHERE {CHAIN} AND b{N} = a1",
    # a tree of explicit JOINs, one equality NULL-safe
    "tree": "SELECT t1.x1, t8.x8, t14.x14 FROM t1 " + " ".join(
        f"JOIN t{k} ON a{k} = b{(k - 1) // 2 + (k == 2)}"
        if k != 9 else f"JOIN t{k} ON a{k} IS NOT DISTINCT FROM b4"
        for k in range(2, N + 1)),
    # a star (kept as one join) and two chains in a cross product
    "star": f"SELECT x1, x9 FROM {FROM} WHERE " + " AND ".join(
        f"a{k} = b1" for k in range(2, N + 1)),
    "two_chains": f"SELECT COUNT(*) AS n, MIN(x1) AS m FROM {FROM} WHERE " + " AND ".join(
        f"a{k} = b{k - 1}" for k in range(2, N + 1) if k != N // 2 + 1),
}


def test_every_random_view_is_wide() -> None:
    for sql in VIEWS.values():
        assert sql.count("t") and all(f"t{k}" in sql for k in range(1, N + 1)), sql


@RANDOM_CDC
@given(data=st.data())
def test_wide_joins_random_cdc(data: st.DataObject) -> None:
    run_workload(TABLES, VIEWS, data, epochs=8, max_ops=12, domains=DOMAINS,
                 modes=("several", "several", "clear"))


@pytest.mark.parametrize("name", ["chain", "cycle", "tree", "two_chains"])
def test_the_shapes_are_split(name: str) -> None:
    with ivm.connect() as db:
        db.execute(";".join(TABLES))
        db.execute(f"CREATE VIEW v AS {VIEWS[name]}")
        assert f"of {N} inputs" not in db.explain("v")
