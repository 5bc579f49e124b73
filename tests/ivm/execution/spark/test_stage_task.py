"""ivm.execution.spark.stage_task: one stage applied to one partition file for one epoch.

Stages come from the real planner, ``incrementalize``, the ``binary_joins`` pass
and ``ivm.execution.spark.stages``; their input is the *wide* Arrow table a Spark task receives.
Results are checked against DuckDB recomputing the view's SQL over the
accumulated base rows, and against a partition that never saw the rolled-back
attempt.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from sqlglot import exp

import ivm.storage.partitions
import ivm.storage.traces
from ivm.circuit.incrementalize import incrementalize
from ivm.errors import ConstraintError, IvmError, IvmWarning
from ivm.execution.embedded import describe
from ivm.execution.spark.stage_task import CONTENTS_TRACE, Ticket, apply_partition, wide_columns
from ivm.execution.spark.stages import Stage, table_stage, view_stages
from ivm.execution.spark.wire import arrow_schema, from_wire_sql
from ivm.operators.project import Project
from ivm.passes.binary_joins import binary_joins
from ivm.schema import WEIGHT, Column, Schema, TableSchema, quote
from ivm.sql_frontend.planner import plan_query
from ivm.storage.partitions import META, partition_file

BASE = {"t": "g VARCHAR, v INTEGER", "u": "id INTEGER, name VARCHAR"}
ITEMS = TableSchema(
    "items", Schema((Column("id", "INTEGER"), Column("name", "VARCHAR"))), primary_key=("id",)
)
BAG = TableSchema("bag", Schema((Column("k", "VARCHAR"), Column("n", "BIGINT"))))
GROUPED = (
    "SELECT g, SUM(v) AS s, COUNT(*) AS n, COUNT(v) AS nv, MIN(v) AS lo, MAX(v) AS hi "
    "FROM t GROUP BY g"
)
GLOBAL = "SELECT COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo FROM t"
JOINED = "SELECT t.g, t.v, u.id, u.name FROM t JOIN u ON t.v = u.id"

Row = tuple  # column values, then the weight


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    for name, columns in BASE.items():
        connection.execute(f"CREATE TABLE {name} ({columns})")
    yield connection
    connection.close()


def stages_of(con: duckdb.DuckDBPyConnection, sql: str) -> list[Stage]:
    relations = {n: describe(con, f"SELECT * FROM {n}") for n in BASE}
    plan = plan_query(sql, relations, lambda text: describe(con, text))
    typed = incrementalize(plan, "v", lambda text: describe(con, text))
    return view_stages(binary_joins(typed, partitioned=True))


def wide(stage: Stage, rows: Sequence[tuple[int, Row]]) -> pa.Table:
    """The wide input of ``stage``: ``(input index, (values..., weight))`` per row."""
    columns: dict[str, tuple[pa.DataType, list]] = {
        "__i": (pa.int32(), [i for i, _ in rows]),
        "__p": (pa.int32(), [0] * len(rows)),
    }
    for index, stage_input in enumerate(stage.inputs):
        types = arrow_schema(stage_input.wire_schema).types
        for j, name in enumerate(wide_columns(stage, index)):
            values = [row[j] if i == index else None for i, row in rows]
            columns[name] = (types[j], values)
    columns[WEIGHT] = (pa.int64(), [row[-1] for _, row in rows])
    return pa.table({name: pa.array(values, type=t) for name, (t, values) in columns.items()})


def changes(con: duckdb.DuckDBPyConnection, stage: Stage, output: pa.Table) -> Counter:
    """A stage's output (wire) as a Z-set with DuckDB values: row -> weight."""
    assert output.schema == arrow_schema(stage.output)
    con.register("__out", output)
    try:
        rows = con.execute(from_wire_sql("SELECT * FROM __out", stage.output)).fetchall()
    finally:
        con.unregister("__out")
    result: Counter = Counter()
    for row in rows:
        result[row[:-1]] += row[-1]
    return result


def run(
    con: duckdb.DuckDBPyConnection,
    stage: Stage,
    directory: Path,
    ticket: Ticket,
    rows: Sequence[tuple[int, Row]],
) -> Counter:
    """Apply ``rows`` to partition 0 of ``stage``; its output change as a Z-set.

    A view's stage is created by a backfill (as ``CREATE VIEW`` does), so a first
    ordinary epoch finds its partition; table stages start with their first batch.
    """
    file = partition_file(directory, 0)
    if stage.table is None and not ticket.backfill and not file.exists():
        start = Ticket(epoch=ticket.committed, committed=ticket.committed, token="create",
                       backfill=True)
        apply_partition(stage, directory, 0, start, wide(stage, []))
    return changes(con, stage, apply_partition(stage, directory, 0, ticket, wide(stage, rows)))


def ticket(epoch: int, token: str | None = None, **options: bool) -> Ticket:
    return Ticket(epoch=epoch, committed=epoch - 1, token=token or f"e{epoch}", **options)


def file_tables(directory: Path) -> dict[str, list[tuple]]:
    """Every table of partition 0 with its raw rows (sorted): the file's whole state."""
    reader = duckdb.connect(str(partition_file(directory, 0)), read_only=True)
    try:
        names = [r[0] for r in reader.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return {
            n: sorted(reader.execute(f"SELECT * FROM {quote(n)}").fetchall(), key=repr)
            for n in sorted(names)
        }
    finally:
        reader.close()


def zset(weights: Counter) -> Counter:
    """``weights`` without zeros (Counter's ``+`` would drop negative weights too)."""
    return Counter({row: w for row, w in weights.items() if w})


def consolidated(rows: list[tuple]) -> Counter:
    result: Counter = Counter()
    for row in rows:
        result[row[:-1]] += row[-1]
    return zset(result)


BOOKKEEPING = ("__ivm_undo", "__ivm_partition", "__ivm_out", "__ivm_tails")


def traces_of(tables: dict[str, list[tuple]]) -> dict[str, Counter]:
    """Every trace among a file's ``tables``, consolidated (bookkeeping left out)."""
    return {
        name: consolidated(rows)
        for name, rows in tables.items()
        if name.startswith("__ivm_") and not name.startswith(BOOKKEEPING)
    }


CONTENTS = CONTENTS_TRACE.strip('"')


def state(directory: Path) -> tuple[tuple, Counter]:
    """The partition's (epoch, previous, token) and its stored contents."""
    tables = file_tables(directory)
    return tables[META][0], traces_of(tables)[CONTENTS]


def base_columns(stage: Stage) -> list[list[str]]:
    """For each stage input, the base-table column each of its columns carries."""
    assert stage.circuit is not None
    result = []
    for index, stage_input in enumerate(stage.inputs):
        assert stage_input.stream is not None
        upstream = stage_input.stream.node
        if stage.inputs[index].carried is not None:  # base rows travel; the task projects
            result.append(list(stage.inputs[index].wire_schema.names))
            continue
        names = []
        for name in stage.inputs[index].schema.names:
            if isinstance(upstream, Project):
                expression = dict(upstream.exprs)[name]
                assert isinstance(expression, exp.Column), expression
                name = expression.name
            names.append(name.split(".", 1)[-1])
        result.append(names)
    return result


def stage_rows(stage: Stage, index: int, table: str, batch: Counter) -> list[tuple[int, Row]]:
    """A base-table batch (row of ``BASE[table]`` -> weight) as rows of stage input ``index``."""
    order = [c.split()[0] for c in BASE[table].split(", ")]
    picks = [order.index(name) for name in base_columns(stage)[index]]
    return [(index, (*(row[p] for p in picks), w)) for row, w in batch.items() if w]


def recompute(con: duckdb.DuckDBPyConnection, sql: str, tables: dict[str, Counter]) -> Counter:
    """The view ``sql`` computed by DuckDB over the given base-table contents.

    (The planner only describes the tables of ``con``; their rows do not matter to it.)
    """
    for name in BASE:
        con.execute(f"DELETE FROM {name}")
        rows = [row for row, w in tables.get(name, Counter()).items() for _ in range(w)]
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES (?, ?)", rows)
    return Counter(con.execute(sql).fetchall())


# -- exactly-once ------------------------------------------------------------------------------


def test_same_ticket_twice_applies_once(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    stage = table_stage(BAG)  # no primary key: applied twice, the rows would count twice
    batch = [(0, ("a", 1, 2)), (0, ("b", None, 1))]
    first = apply_partition(stage, tmp_path, 0, ticket(1), wide(stage, batch))
    before = file_tables(tmp_path)
    again = apply_partition(stage, tmp_path, 0, ticket(1), wide(stage, batch))
    assert again.equals(first)
    # a retry re-emits the stored change even if (wrongly) given other rows
    other = run(con, stage, tmp_path, ticket(1), [(0, ("z", 9, 1))])
    assert other == changes(con, stage, first) == Counter({("a", 1): 2, ("b", None): 1})
    after = file_tables(tmp_path)
    assert after == before
    assert after[META] == [(1, -1, "e1")]
    assert traces_of(after)[CONTENTS] == Counter({("a", 1): 2, ("b", None): 1})


def test_same_ticket_twice_applies_once_to_an_aggregate(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    (stage,) = stages_of(con, GROUPED)
    epoch1 = stage_rows(stage, 0, "t", Counter({("a", 1): 1, ("a", 4): 1, ("b", 2): 1}))
    run(con, stage, tmp_path, ticket(1), epoch1)
    epoch2 = stage_rows(stage, 0, "t", Counter({("a", 1): -1, ("b", 7): 1}))
    first = run(con, stage, tmp_path, ticket(2), epoch2)
    before = file_tables(tmp_path)
    assert run(con, stage, tmp_path, ticket(2), epoch2) == first
    assert file_tables(tmp_path) == before
    assert first == Counter(
        {
            ("a", 5, 2, 2, 1, 4): -1,
            ("a", 4, 1, 1, 4, 4): 1,
            ("b", 2, 1, 1, 2, 2): -1,
            ("b", 9, 2, 2, 2, 7): 1,
        }
    )


# -- an attempt the driver never committed -----------------------------------------------------


ATTEMPTS = {
    # the view, whether its files start with a backfill, the committed rows before the
    # epoch, attempt A (never committed) and attempt B
    "grouped": (
        GROUPED,
        False,
        Counter({("a", 1): 1, ("a", 4): 1, ("b", 2): 2}),
        Counter({("a", 1): -1, ("c", 3): 1, ("b", 2): -1}),
        Counter({("b", 5): 1, ("a", 4): -1}),
    ),
    "grouped_fresh_file": (
        GROUPED,
        False,
        Counter(),
        Counter({("c", 3): 1, ("a", 4): 1}),
        Counter({("b", 5): 1}),
    ),
    "global_after_backfill": (
        GLOBAL,
        True,
        Counter({("a", 1): 1, ("b", 2): 1}),
        Counter({("a", 1): -1, ("a", 0): 1}),
        Counter({("b", 2): -1, ("c", 5): 2}),
    ),
}


@pytest.mark.parametrize("case", sorted(ATTEMPTS))
def test_uncommitted_attempt_is_rolled_back_then_replaced(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, case: str
) -> None:
    sql, backfill, committed, attempt_a, attempt_b = ATTEMPTS[case]
    (stage,) = stages_of(con, sql)
    epoch = 2 if committed else 1
    rolled, clean = tmp_path / "rolled", tmp_path / "clean"
    for directory in (rolled, clean):
        if backfill:
            apply_partition(stage, directory, 0, Ticket(0, 0, "bf", backfill=True), None)
        if committed:
            run(con, stage, directory, ticket(1), stage_rows(stage, 0, "t", committed))
    run(con, stage, rolled, ticket(epoch, "A"), stage_rows(stage, 0, "t", attempt_a))
    # the driver committed only epoch - 1; the next ingest attempt B sends another batch
    b_rows = stage_rows(stage, 0, "t", attempt_b)
    output = run(con, stage, rolled, ticket(epoch, "B"), b_rows)
    assert output == run(con, stage, clean, ticket(epoch, "B"), b_rows)
    rolled_tables, clean_tables = file_tables(rolled), file_tables(clean)
    assert traces_of(rolled_tables) == traces_of(clean_tables)
    assert rolled_tables[META] == clean_tables[META]
    assert rolled_tables[META][0][0::2] == (epoch, "B")
    # and B's change is right: DuckDB over the committed rows, then with B's
    after = committed.copy()
    after.update(attempt_b)
    expected = recompute(con, sql, {"t": after})
    assert traces_of(rolled_tables)[CONTENTS] == expected
    expected.subtract(recompute(con, sql, {"t": committed}))
    assert output == zset(expected)


@pytest.mark.parametrize("first_epoch", [False, True], ids=["later_epoch", "first_epoch"])
def test_uncommitted_table_attempt_is_rolled_back(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, first_epoch: bool
) -> None:
    stage = table_stage(ITEMS)
    epoch = 1 if first_epoch else 2
    if not first_epoch:
        run(con, stage, tmp_path, ticket(1), [(0, (1, "a", 1)), (0, (2, "b", 1))])
    run(con, stage, tmp_path, ticket(epoch, "A"), [(0, (9, "z", 1)), (0, (3, "c", 1))])
    # B inserts key 3 too: valid only once A is undone
    output = run(con, stage, tmp_path, ticket(epoch, "B"), [(0, (3, "x", 1)), (0, (4, "d", 1))])
    assert output == Counter({(3, "x"): 1, (4, "d"): 1})
    rows = Counter({(3, "x"): 1, (4, "d"): 1})
    if not first_epoch:
        rows.update({(1, "a"): 1, (2, "b"): 1})
    assert state(tmp_path) == ((epoch, 1 if not first_epoch else -1, "B"), rows)


def test_a_stale_ticket_does_not_undo_a_later_epoch(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    stage = table_stage(BAG)
    run(con, stage, tmp_path, ticket(1, "A"), [(0, ("a", 1, 1))])
    run(con, stage, tmp_path, ticket(2, "B"), [(0, ("b", 1, 1))])
    before = file_tables(tmp_path)
    with contextlib.suppress(IvmError):  # refusing the stale ticket is fine too
        run(con, stage, tmp_path, ticket(1, "A"), [(0, ("a", 1, 1))])
    assert state(tmp_path) == ((2, 1, "B"), Counter({("a", 1): 1, ("b", 1): 1}))
    assert file_tables(tmp_path) == before


# -- table constraints -------------------------------------------------------------------------

VIOLATIONS = {
    "items": [
        ([(0, (9, "nine", -1))], "deletes a row that is not there"),
        ([(0, (1, "a", -2))], "deletes a row that is not there"),
        ([(0, (1, "other", -1))], "deletes a row that is not there"),
        ([(0, (1, "again", 1))], "duplicate primary key"),
        ([(0, (1, "a", 1))], "duplicate primary key"),
        ([(0, (5, "x", 1)), (0, (5, "y", 1))], "duplicate primary key"),
        ([(0, (5, "x", 2))], "duplicate primary key"),
        ([(0, (6, "ok", 1)), (0, (2, "b", -1)), (0, (7, "gone", -1))], "not there"),
    ],
    "bag": [
        ([(0, ("k", None, -1))], "deletes a row that is not there"),
        ([(0, ("a", 1, -3))], "deletes a row that is not there"),
        ([(0, ("a", 1, -1)), (0, ("a", None, -1))], "deletes a row that is not there"),
    ],
}


@pytest.mark.parametrize("table", [ITEMS, BAG], ids=["items", "bag"])
def test_constraint_violations_leave_the_file_unchanged(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, table: TableSchema
) -> None:
    stage = table_stage(table)
    first = [(0, (1, "a", 1)), (0, (2, "b", 1))] if table is ITEMS else [(0, ("a", 1, 2))]
    run(con, stage, tmp_path, ticket(1), first)
    before = file_tables(tmp_path)
    for batch, message in VIOLATIONS[table.name]:
        with pytest.raises(ConstraintError, match=message):
            run(con, stage, tmp_path, ticket(2), batch)
    assert file_tables(tmp_path) == before
    assert before[META] == [(1, -1, "e1")]


def test_constraint_violation_after_a_roll_back_undoes_the_roll_back_too(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    stage = table_stage(ITEMS)
    run(con, stage, tmp_path, ticket(1), [(0, (1, "a", 1))])
    run(con, stage, tmp_path, ticket(2, "A"), [(0, (2, "b", 1))])
    before = file_tables(tmp_path)
    with pytest.raises(ConstraintError):
        run(con, stage, tmp_path, ticket(2, "B"), [(0, (1, "dup", 1))])
    assert file_tables(tmp_path) == before
    assert before[META] == [(2, 1, "A")]


def test_violation_on_a_fresh_file_leaves_it_usable(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    stage = table_stage(ITEMS)
    with pytest.raises(ConstraintError):
        run(con, stage, tmp_path, ticket(1), [(0, (1, "a", -1))])
    output = run(con, stage, tmp_path, ticket(1, "retry"), [(0, (1, "a", 1))])
    assert output == Counter({(1, "a"): 1})
    assert state(tmp_path) == ((1, -1, "retry"), Counter({(1, "a"): 1}))


def test_deletes_match_nulls_and_updates_pass(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    bag, items = table_stage(BAG), table_stage(ITEMS)
    run(con, bag, tmp_path / "bag", ticket(1), [(0, (None, None, 2)), (0, ("a", None, 1))])
    output = run(
        con, bag, tmp_path / "bag", ticket(2), [(0, (None, None, -1)), (0, ("a", None, -1))]
    )
    assert output == Counter({(None, None): -1, ("a", None): -1})
    # a row inserted and deleted in one batch is no change, even if it is not there
    noop = [(0, ("new", 1, 1)), (0, ("new", 1, -1))]
    assert run(con, bag, tmp_path / "bag", ticket(3), noop) == Counter()
    assert state(tmp_path / "bag")[1] == Counter({(None, None): 1})
    # an update of a key in one batch: delete the old row, insert the new one
    run(con, items, tmp_path / "items", ticket(1), [(0, (1, "a", 1)), (0, (2, "b", 1))])
    output = run(con, items, tmp_path / "items", ticket(2), [(0, (1, "a", -1)), (0, (1, "z", 1))])
    assert output == Counter({(1, "a"): -1, (1, "z"): 1})
    assert state(tmp_path / "items")[1] == Counter({(1, "z"): 1, (2, "b"): 1})


# -- upsert ------------------------------------------------------------------------------------


def test_upsert_replaces_rows_by_key(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    stage = table_stage(ITEMS)
    run(con, stage, tmp_path, ticket(1), [(0, (1, "a", 1)), (0, (2, "b", 1)), (0, (3, "c", 1))])
    # replace 1, re-insert 2 as it is, insert 4, delete 3
    batch = [(0, (1, "z", 1)), (0, (2, "b", 1)), (0, (4, "d", 1)), (0, (3, "c", -1))]
    output = run(con, stage, tmp_path, ticket(2, upsert=True), batch)
    assert output == Counter({(1, "a"): -1, (1, "z"): 1, (4, "d"): 1, (3, "c"): -1})
    assert state(tmp_path)[1] == Counter({(1, "z"): 1, (2, "b"): 1, (4, "d"): 1})
    # the batch's own delete of a key it upserts is dropped: the insert replaces the row
    batch = [(0, (1, "z", -1)), (0, (1, "q", 1)), (0, (2, "x", -1)), (0, (2, "y", 1))]
    output = run(con, stage, tmp_path, ticket(3, upsert=True), batch)
    assert output == Counter({(1, "z"): -1, (1, "q"): 1, (2, "b"): -1, (2, "y"): 1})
    assert state(tmp_path) == ((3, 2, "e3"), Counter({(1, "q"): 1, (2, "y"): 1, (4, "d"): 1}))


def test_upsert_without_primary_key_inserts(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    stage = table_stage(BAG)
    run(con, stage, tmp_path, ticket(1), [(0, ("a", 1, 1))])
    output = run(con, stage, tmp_path, ticket(2, upsert=True), [(0, ("a", 1, 1))])
    assert output == Counter({("a", 1): 1})
    assert state(tmp_path)[1] == Counter({("a", 1): 2})


# -- view stages over several epochs -----------------------------------------------------------

SCRIPTED = [
    Counter({("a", 1): 1, ("a", 5): 1, ("b", 2): 2, (None, 3): 1, ("c", None): 1}),
    Counter({("a", 1): -1, ("b", 7): 1, ("a", 0): 1}),  # a's MIN goes
    Counter({("b", 2): -2, ("b", 7): -1, ("c", None): -1}),  # groups b and c go
    Counter({("b", 4): 1, (None, 3): -1, (None, None): 1, ("e", 2): 1}),
    Counter({("e", 2): -1, ("e", 3): 1}),  # an update
    Counter({("a", 5): -1, ("a", 0): -1, (None, None): -1, ("b", 4): -1, ("e", 3): -1}),  # all go
]


def random_epochs(seed: int, count: int, model: Counter) -> list[Counter]:
    """Batches of inserts (some of two copies) and deletes of live rows of ``t``."""
    rng = random.Random(seed)
    model = model.copy()
    epochs = []
    for _ in range(count):
        batch: Counter = Counter()
        for _ in range(rng.randint(1, 6)):
            live = [row for row, w in (model + batch).items() if w > 0]
            if live and rng.random() < 0.4:
                batch[rng.choice(live)] -= 1
            else:
                row = (rng.choice(["a", "b", "x", None]), rng.choice([0, 1, 2, None]))
                batch[row] += rng.choice([1, 1, 2])
        model.update(batch)
        epochs.append(batch)
    return epochs


@pytest.mark.parametrize(
    ("sql", "compacting"),
    [(GROUPED, False), (GLOBAL, False), (GROUPED, True)],
    ids=["grouped", "global", "grouped_compacted_every_epoch"],
)
def test_aggregate_stage_over_epochs_equals_duckdb(
    con: duckdb.DuckDBPyConnection,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sql: str,
    compacting: bool,
) -> None:
    if compacting:  # every trace (inputs, group versions, contents) compacted after each
        # epoch that retracts a row of it
        monkeypatch.setattr(ivm.storage.traces, "COMPACT_MIN_ROWS", 1)
        monkeypatch.setattr(ivm.storage.traces, "COMPACT_FRACTION", 0.0)
    compactions: list[str] = []
    compact = ivm.storage.partitions.compact

    def counted(con: duckdb.DuckDBPyConnection, table: str, key: tuple[str, ...]) -> int:
        compactions.append(table)
        return compact(con, table, key)

    monkeypatch.setattr(ivm.storage.partitions, "compact", counted)
    (stage,) = stages_of(con, sql)
    assert stage.kind.startswith("aggregate") and stage.contents
    view: Counter = Counter()
    if sql == GLOBAL:  # a new view starts with its backfill: the global row over no rows
        view.update(run(con, stage, tmp_path, Ticket(0, 0, "bf", backfill=True), []))
    model: Counter = Counter()
    epochs = [*SCRIPTED, *random_epochs(seed=5, count=2, model=Counter())]
    for epoch, batch in enumerate(epochs, start=1):
        model.update(batch)
        assert all(w >= 0 for w in model.values())
        view.update(run(con, stage, tmp_path, ticket(epoch), stage_rows(stage, 0, "t", batch)))
        expected = recompute(con, sql, {"t": +model})
        assert zset(view) == expected, f"epoch {epoch}"
    tables = file_tables(tmp_path)
    assert traces_of(tables)[CONTENTS] == expected
    assert bool(compactions) == compacting


def test_join_stage_over_epochs_equals_duckdb(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    (stage,) = stages_of(con, JOINED)  # the join's key t.v survives: it stores the view
    assert stage.kind == "join" and len(stage.inputs) == 2 and stage.contents
    rng = random.Random(11)
    tables: dict[str, Counter] = {"t": Counter(), "u": Counter()}
    view: Counter = Counter()
    for epoch in range(1, 6):
        rows = []
        for index, name in enumerate(("t", "u")):
            batch: Counter = Counter()
            for _ in range(rng.randint(1, 4)):  # both sides change at once
                live = [r for r, w in (tables[name] + batch).items() if w > 0]
                if live and rng.random() < 0.3:
                    batch[rng.choice(live)] -= 1
                elif name == "t":
                    batch[(rng.choice(["a", None]), rng.choice([1, 2, None]))] += 1
                else:
                    batch[(rng.choice([1, 2, None]), rng.choice(["x", "y"]))] += 1
            tables[name].update(batch)
            rows += stage_rows(stage, index, name, batch)
        view.update(run(con, stage, tmp_path, ticket(epoch), rows))
        expected = recompute(con, JOINED, {n: +c for n, c in tables.items()})
        assert zset(view) == expected, f"epoch {epoch}"
    assert expected, "the random batches should make the join produce rows"
    assert state(tmp_path)[1] == expected


# -- backfill ----------------------------------------------------------------------------------


def spark_backfill_marker(stage: Stage) -> pa.Table:
    """What Spark sends every partition in a backfill: a row with ``__i`` = -1, weight 0."""
    table = wide(stage, [(0, (*(None for _ in stage.inputs[0].wire_schema.columns), 0))])
    return table.set_column(0, "__i", pa.array([-1], type=pa.int32()))


@pytest.mark.parametrize("form", ["none", "no_rows", "marker"])
def test_backfill_of_a_global_aggregate_emits_its_row(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, form: str
) -> None:
    (stage,) = stages_of(con, GLOBAL)
    assert not stage.partitioned
    given = {"none": None, "no_rows": wide(stage, []), "marker": spark_backfill_marker(stage)}
    output = apply_partition(stage, tmp_path, 0, Ticket(3, 3, "bf", backfill=True), given[form])
    assert changes(con, stage, output) == Counter({(0, None, None): 1})
    assert changes(con, stage, output) == recompute(con, GLOBAL, {})
    tables = file_tables(tmp_path)
    found = traces_of(tables)
    assert found[CONTENTS] == Counter({(0, None, None): 1})
    # MIN is recomputed per key: the per-key operator keeps its input's rows itself
    assert any(name.startswith("__ivm_op_input-") for name in found)
    assert [n for n in found if n.startswith("__ivm_op")]  # the group versions
    assert tables[META] == [(3, -1, "bf")]
    if form == "marker":  # once is enough: the next epoch retracts the backfilled row
        batch = stage_rows(stage, 0, "t", Counter({("a", 2): 1}))
        later = run(con, stage, tmp_path, Ticket(4, 3, "e4"), batch)
        assert later == Counter({(0, None, None): -1, (1, 2, 2): 1})


def test_backfill_of_a_grouped_aggregate_creates_empty_traces(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    (stage,) = stages_of(con, GROUPED)
    output = apply_partition(stage, tmp_path, 0, Ticket(0, 0, "bf", backfill=True), None)
    assert output.num_rows == 0
    assert output.schema == arrow_schema(stage.output)
    found = traces_of(file_tables(tmp_path))
    assert found[CONTENTS] == Counter()
    # MIN/MAX keep running group state and the input's rows (read for groups whose
    # extreme left): both traces exist, empty
    assert {n.split("-")[0] for n in found if n.startswith("__ivm_op")} == {
        "__ivm_op_input", "__ivm_op_groups"
    }


def test_empty_input_outside_a_backfill_touches_nothing(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    (stage,) = stages_of(con, GROUPED)
    for given in (None, wide(stage, [])):
        output = apply_partition(stage, tmp_path, 0, ticket(1), given)
        assert output.num_rows == 0 and output.schema == arrow_schema(stage.output)
    assert not partition_file(tmp_path, 0).exists()


# -- the fence -------------------------------------------------------------------------------


def test_a_task_of_an_ended_ingest_attempt_writes_nothing(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    stage = table_stage(BAG)
    fence = tmp_path / "fence"
    fence.write_text("A")
    run(con, stage, tmp_path, replace(ticket(1, "A"), fence=str(fence)), [(0, ("a", 1, 1))])
    before = file_tables(tmp_path)
    fence.write_text("closed-B")  # attempt B failed; the driver rolls back, then this task runs
    with pytest.raises(IvmError, match="refused"):
        run(con, stage, tmp_path, replace(ticket(2, "B"), fence=str(fence)), [(0, ("b", 1, 1))])
    assert file_tables(tmp_path) == before


def test_a_task_of_an_ended_attempt_makes_no_file(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    # A task of a dead driver's CREATE VIEW, still running after a new session opened and
    # removed the view's directory (it was never committed), must not make it again.
    (stage,) = stages_of(con, GROUPED)
    fence = tmp_path / "fence"
    fence.write_text("opened")
    directory = tmp_path / "views" / "v2-extra" / stage.name
    orphan = Ticket(epoch=1, committed=1, token="dead", backfill=True, fence=str(fence))
    with pytest.raises(IvmError, match="refused"):
        apply_partition(stage, directory, 0, orphan, None)
    assert not (tmp_path / "views").exists()


def test_a_full_disk_at_a_partitions_compaction_warns_and_keeps_its_epoch(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Compaction runs after the partition committed its epoch: the task still returns the
    # epoch's change, and the trace is compacted at a later epoch.
    from ivm import faults

    monkeypatch.setattr(ivm.storage.traces, "COMPACT_MIN_ROWS", 1)
    monkeypatch.setattr(ivm.storage.traces, "COMPACT_FRACTION", 0.05)
    stage = table_stage(BAG)
    run(con, stage, tmp_path, ticket(1), [(0, ("a", 1, 1)), (0, ("b", 2, 1))])
    faults.arm("compaction.begin", "enospc")
    try:
        with pytest.warns(IvmWarning, match="compaction of .* failed.*No space left"):
            out = run(con, stage, tmp_path, ticket(2), [(0, ("a", 1, -1)), (0, ("c", 3, 1))])
    finally:
        faults.disarm()
    assert out == Counter({("a", 1): -1, ("c", 3): 1})
    contents = file_tables(tmp_path)[CONTENTS_TRACE.strip('"')]
    assert sum(row[-1] for row in contents) == 2  # b and c live; the a rows not compacted
    run(con, stage, tmp_path, ticket(3), [(0, ("d", 4, 1))])  # due still: compacted now
    assert sorted(file_tables(tmp_path)[CONTENTS_TRACE.strip('"')]) == [
        ("b", 2, 1), ("c", 3, 1), ("d", 4, 1)]


def test_a_task_gives_its_duckdb_the_sessions_memory_limit_or_its_machines_share() -> None:
    from ivm.execution.spark.stage_task import configure
    from ivm.storage.memory import task_default_limit

    con = duckdb.connect()
    limit = "SELECT value FROM duckdb_settings() WHERE name = 'memory_limit'"
    configure(con, Ticket(epoch=1, committed=0, token="t", memory_limit=64 * 1024**2))
    assert con.execute(limit).fetchall()[0][0] == "64.0 MiB"
    configure(con, Ticket(epoch=1, committed=0, token="t"))  # none given: its share
    share = duckdb.connect()
    share.execute(f"SET memory_limit = '{task_default_limit()}B'")
    assert con.execute(limit).fetchall() == share.execute(limit).fetchall()
    assert con.execute("SELECT current_setting('threads')").fetchall()[0][0] == 1
