"""storage.partitions: the partition file layout and each file's epoch bookkeeping.

A partition file must be able to undo exactly its last epoch (appending the
negation of what that epoch appended), whatever compaction did in between, and
``roll_back_ahead`` must touch only files ahead of the driver's committed epoch.
"""

from __future__ import annotations

import random
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

import ivm.storage.traces as traces
from ivm.storage.partitions import (
    META,
    OUT,
    TAILS,
    UNDO,
    PartitionLog,
    compact_due,
    encode,
    open_partition,
    partition_file,
    partition_files,
    roll_back_ahead,
    stray_directories,
    table_directory,
    view_directory,
)
from ivm.storage.sqltext import WEIGHT, consolidate_sql, quote
from ivm.storage.traces import create_trace

TRACE = quote("__ivm_in0")
OTHER = quote("__ivm_contents")
COLUMNS = [("k", "VARCHAR"), ("v", "BIGINT")]

ODD_NAMES = [
    ".",
    "..",
    "",
    "/",
    "../escape",
    "../../etc/passwd",
    "a/b",
    "a%2Fb",
    "a%252Fb",
    "a\\b",
    " ",
    "a b",
    "it's",
    '"quoted"',
    "ü",
    "Ü",
    "über",
    "中文表",
    "😀",
    "tab\there",
    "line\nbreak",
    "nul\x00byte",
    "~",
    "-",
    "part-00000.duckdb",
    "t-x",
]


# -- layout ----------------------------------------------------------------------------------


@pytest.mark.parametrize("directory", [table_directory, view_directory])
def test_odd_names_stay_inside_their_directory(
    tmp_path: Path, directory: Callable[[Path, str, int], Path]
) -> None:
    parent = directory(tmp_path, "x", 1).parent
    for name in ODD_NAMES:
        path = directory(tmp_path, name, 1)
        assert path.parent == parent, name
        assert path.name not in (".", "..", ""), name
        assert "/" not in path.name and "\x00" not in path.name, name
        file = partition_file(path, 3)
        file.parent.mkdir(parents=True)
        file.write_bytes(b"")
        assert file.resolve().parent.parent == parent.resolve(), name
    assert sorted(p.name for p in parent.iterdir()) == sorted(
        directory(tmp_path, n, 1).name for n in ODD_NAMES
    )


def test_odd_names_never_collide(tmp_path: Path) -> None:
    names = [*ODD_NAMES, "A", "a", "a.b", "a_b", "a-b"]
    paths = [table_directory(tmp_path, n, 1) for n in names]
    paths += [view_directory(tmp_path, n, 1) for n in names]
    assert len(set(paths)) == len(paths)
    assert len({encode(n) for n in names}) == len(names)


def test_encode_is_reversible() -> None:
    for name in ODD_NAMES:
        if name and len(encode(name)) < 200:  # long names are cut and given a digest
            assert urllib.parse.unquote(encode(name)) == name


def test_tables_and_views_of_one_name_are_apart(tmp_path: Path) -> None:
    assert table_directory(tmp_path, "x", 3) == tmp_path / "tables" / "t3-x"
    assert view_directory(tmp_path, "x", 3) == tmp_path / "views" / "v3-x"
    # each creation of a name is its own directory
    assert table_directory(tmp_path, "x", 3) != table_directory(tmp_path, "x", 4)


def test_stray_directories_are_those_not_expected(tmp_path: Path) -> None:
    kept, stray = table_directory(tmp_path, "x", 3), view_directory(tmp_path, "x", 2)
    for directory in (kept, stray):
        directory.mkdir(parents=True)
    assert stray_directories(tmp_path, {kept}) == [stray]


@pytest.mark.parametrize("name", [".", "..", ""])
def test_encode_never_gives_a_special_file_name(name: str) -> None:
    assert encode(name) not in (".", "..", "")


def test_long_unicode_name_gets_a_directory(tmp_path: Path) -> None:
    name = "订单" * 14 + "表"  # 29 characters
    file = partition_file(table_directory(tmp_path, name, 1), 0)
    file.parent.mkdir(parents=True)
    open_partition(file).close()


def test_partition_files_are_listed_in_bucket_order(tmp_path: Path) -> None:
    for bucket in (10, 2, 0, 1):
        partition_file(tmp_path, bucket).write_bytes(b"")
    (tmp_path / "part-00002.duckdb.wal").write_bytes(b"")
    (tmp_path / "other.duckdb").write_bytes(b"")
    assert [p.name for p in partition_files(tmp_path)] == [
        "part-00000.duckdb",
        "part-00001.duckdb",
        "part-00002.duckdb",
        "part-00010.duckdb",
    ]
    assert partition_files(tmp_path / "missing") == []


# -- epoch bookkeeping -----------------------------------------------------------------------


def contents(con: duckdb.DuckDBPyConnection, trace: str = TRACE) -> Counter:
    """The trace as a consolidated Z-set: row -> net weight, zeros dropped."""
    rows = con.execute(
        f"SELECT k, v, SUM({WEIGHT})::BIGINT FROM {trace} GROUP BY ALL HAVING SUM({WEIGHT}) <> 0"
    ).fetchall()
    return Counter({(k, v): w for k, v, w in rows})


def tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


@dataclass(frozen=True)
class Snapshot:
    """What a partition file holds, read with one connection."""

    meta: tuple
    trace: Counter
    other: Counter
    raw: int  # rows stored in TRACE, before consolidation
    tails: dict[str, tuple[int, int]]
    out: list[tuple] | None


def snapshot(file: Path) -> Snapshot:
    con = open_partition(file, read_only=True)
    try:
        present = tables(con)
        return Snapshot(
            meta=con.execute(f"SELECT epoch, previous, token FROM {META}").fetchall()[0],
            trace=contents(con),
            other=contents(con, OTHER),
            raw=con.execute(f"SELECT count(*) FROM {TRACE}").fetchall()[0][0],
            tails={t: (b, a) for t, b, a in con.execute(
                f"SELECT target, base, appended FROM {TAILS}").fetchall()},
            out=con.execute(f"SELECT * FROM {OUT}").fetchall() if OUT in present else None,
        )
    finally:
        con.close()


def rows_sql(rows: list[tuple[str | None, int | None, int]]) -> str:
    values = ", ".join(
        "(" + ", ".join("NULL" if x is None else repr(x) for x in row) + ")" for row in rows
    )
    return f"SELECT * FROM (VALUES {values}) AS r(k, v, {WEIGHT})"


def apply_epoch(file: Path, epoch: int, token: str, batches: dict[str, list[tuple]]) -> None:
    """What a task does for one epoch: begin, append to traces, record; one transaction."""
    con = open_partition(file)
    try:
        con.execute("BEGIN TRANSACTION")
        log = PartitionLog(con)
        if log.fresh:
            for trace in (TRACE, OTHER):
                create_trace(con, trace, COLUMNS)
                log.track(trace)
        log.begin()
        log.store_output(rows_sql([("out", epoch, 1)]))
        for trace, rows in batches.items():
            log.append(trace, rows_sql(rows))
        log.finish(epoch, token)
        con.execute("COMMIT")
    finally:
        con.close()


def test_fresh_file(tmp_path: Path) -> None:
    con = open_partition(tmp_path / "p.duckdb")
    try:
        log = PartitionLog(con)
        assert log.fresh
        assert (log.epoch, log.previous, log.token) == (-1, -1, "")
        assert {META, TAILS} <= tables(con)
        assert not log.applied(-1, "x")
        again = PartitionLog(con)
        assert not again.fresh
        assert (again.epoch, again.previous, again.token) == (-1, -1, "")
    finally:
        con.close()


def test_fresh_log_in_a_rolled_back_transaction_leaves_nothing(tmp_path: Path) -> None:
    file = tmp_path / "p.duckdb"
    con = open_partition(file)
    try:
        con.execute("BEGIN TRANSACTION")
        PartitionLog(con)
        con.execute("ROLLBACK")
        assert PartitionLog(con).fresh
    finally:
        con.close()


def test_finish_records_epoch_previous_and_token(tmp_path: Path) -> None:
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 0, "A", {TRACE: [("a", 1, 1)]})
    assert snapshot(file).meta == (0, -1, "A")
    apply_epoch(file, 1, "B", {TRACE: [("b", 2, 1)]})
    con = open_partition(file, read_only=True)
    try:
        log = PartitionLog(con)
        assert (log.epoch, log.previous, log.token) == (1, 0, "B")
        assert log.applied(1, "B")
        assert not log.applied(1, "A")
        assert not log.applied(0, "A")  # only the last epoch counts
        assert not log.applied(2, "B")
    finally:
        con.close()


def test_roll_back_restores_the_traces_and_the_epoch(tmp_path: Path) -> None:
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 4, "A", {TRACE: [("a", 1, 2), ("b", None, 1)], OTHER: [("x", 1, 1)]})
    before = snapshot(file)
    apply_epoch(
        file,
        5,
        "B",
        {TRACE: [("a", 1, -2), ("c", 3, 1), ("c", 3, 1)], OTHER: [("x", 1, -1), ("y", 2, 5)]},
    )
    con = open_partition(file)
    try:
        assert contents(con) == Counter({("b", None): 1, ("c", 3): 2})
        con.execute("BEGIN TRANSACTION")
        log = PartitionLog(con)
        log.roll_back()
        assert (log.epoch, log.token) == (4, "")
        con.execute("COMMIT")
        assert OUT not in tables(con)
        undo = [t for t in tables(con) if t.startswith(f"{UNDO}_")]
        assert undo and all(
            con.execute(f'SELECT count(*) FROM "{t}"').fetchone() == (0,) for t in undo
        )
    finally:
        con.close()
    after = snapshot(file)
    assert (after.trace, after.other) == (before.trace, before.other)
    assert after.meta == (4, 4, "")


def test_roll_back_undoes_several_appends_to_one_trace(tmp_path: Path) -> None:
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 0, "A", {TRACE: [("a", 1, 1)]})
    con = open_partition(file)
    try:
        con.execute("BEGIN TRANSACTION")
        log = PartitionLog(con)
        log.begin()
        log.append(TRACE, rows_sql([("b", 2, 1)]))
        log.append(TRACE, rows_sql([("a", 1, -1), ("c", 3, 4)]))
        log.finish(1, "B")
        log.roll_back()
        con.execute("COMMIT")
        assert contents(con) == Counter({("a", 1): 1})
    finally:
        con.close()


def test_roll_back_of_the_first_epoch_removes_the_file(tmp_path: Path) -> None:
    """The file held nothing before that epoch (a table's new partition): a refused batch
    leaves no file behind, and the next epoch makes it anew."""
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 0, "A", {TRACE: [("a", 1, 1), ("a", 1, 1)]})
    assert roll_back_ahead(file, -1)
    assert list(tmp_path.iterdir()) == []
    apply_epoch(file, 0, "B", {TRACE: [("b", 1, 1)]})
    after = snapshot(file)
    assert (after.trace, after.meta) == (Counter({("b", 1): 1}), (0, -1, "B"))


def test_begin_forgets_the_previous_epochs_undo(tmp_path: Path) -> None:
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 0, "A", {TRACE: [("a", 1, 1)]})
    apply_epoch(file, 1, "B", {TRACE: [("b", 1, 1)]})
    assert roll_back_ahead(file, 0)
    con = open_partition(file)
    try:
        # only epoch 1 is undone: epoch 0's rows stay, even after a second roll-back
        assert contents(con) == Counter({("a", 1): 1})
        PartitionLog(con).roll_back()
        assert contents(con) == Counter({("a", 1): 1})
    finally:
        con.close()


def test_roll_back_then_apply_again(tmp_path: Path) -> None:
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 0, "A", {TRACE: [("a", 1, 1)]})
    apply_epoch(file, 1, "B", {TRACE: [("b", 1, 1)]})
    assert roll_back_ahead(file, 0)
    apply_epoch(file, 1, "C", {TRACE: [("c", 1, 1)]})
    after = snapshot(file)
    assert after.meta == (1, 0, "C")
    assert after.trace == Counter({("a", 1): 1, ("c", 1): 1})


@pytest.mark.parametrize(
    ("epoch", "committed", "rolled"), [(3, 2, True), (3, 3, False), (3, 4, False), (0, -1, True)]
)
def test_roll_back_ahead_only_rolls_back_files_ahead(
    tmp_path: Path, epoch: int, committed: int, rolled: bool
) -> None:
    file = tmp_path / "p.duckdb"
    if epoch > 0:
        apply_epoch(file, epoch - 1, "A", {TRACE: [("a", 1, 1)]})
    before = Counter({("a", 1): 1}) if epoch > 0 else Counter()
    apply_epoch(file, epoch, "B", {TRACE: [("b", 2, 1)]})
    assert roll_back_ahead(file, committed) is rolled
    if rolled and epoch == 0:  # nothing before: the file is gone
        assert not file.exists()
        return
    after = snapshot(file)
    if rolled:
        assert after.trace == before
        assert after.meta == (epoch - 1, epoch - 1, "")
        assert after.out is None
    else:
        assert after.trace == before + Counter({("b", 2): 1})
        assert after.meta == (epoch, epoch - 1, "B")
        assert after.out == [("out", epoch, 1)]


def test_store_output_is_kept_until_the_next_one(tmp_path: Path) -> None:
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 0, "A", {})
    assert snapshot(file).out == [("out", 0, 1)]
    apply_epoch(file, 1, "B", {})
    assert snapshot(file).out == [("out", 1, 1)]


def test_live_rows_are_the_positive_consolidated_rows(tmp_path: Path) -> None:
    file = tmp_path / "p.duckdb"
    apply_epoch(
        file,
        0,
        "A",
        {
            TRACE: [
                ("a", 1, 2),
                ("a", 1, -1),
                ("b", 2, 1),
                ("b", 2, -1),
                ("c", None, 1),
                ("d", 4, -1),
            ]
        },
    )
    con = open_partition(file, read_only=True)
    try:
        live = consolidate_sql(f"SELECT * FROM {TRACE}", ["k", "v"], positive_only=True)
        rows = con.execute(live).fetchall()
    finally:
        con.close()
    assert sorted(rows, key=str) == sorted([("a", 1, 1), ("c", None, 1)], key=str)


# -- compaction --------------------------------------------------------------------------------


def compact_file(file: Path) -> None:
    con = open_partition(file)
    try:
        compact_due(con, {TRACE: ("k", "v"), OTHER: ("k",)})
    finally:
        con.close()


def test_tails_count_appended_rows(tmp_path: Path) -> None:
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 0, "A", {TRACE: [("a", 1, 1), ("b", 1, 1)], OTHER: [("a", 1, 1)]})
    apply_epoch(file, 1, "B", {TRACE: [("c", 1, 1)]})
    assert snapshot(file).tails == {TRACE: (0, 3), OTHER: (0, 1)}


def test_compaction_keeps_contents_and_resets_the_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", 5)
    file = tmp_path / "p.duckdb"
    rng = random.Random(3)
    model: Counter = Counter()
    raw = 0
    for epoch in range(4):
        batch = []
        for _ in range(4):
            row = (rng.choice("abc"), rng.choice([1, 2, None]))
            weight = -1 if model[row] > 0 and rng.random() < 0.4 else 1
            model[row] += weight
            batch.append((*row, weight))
        apply_epoch(file, epoch, f"t{epoch}", {TRACE: batch, OTHER: [("x", epoch, 1)]})
        raw += len(batch)
        compact_file(file)
        after = snapshot(file)
        assert after.trace == +model
        base, appended = after.tails[TRACE]
        if appended == 0:  # compacted: only consolidated rows are left
            assert base == after.raw == len(+model)
            raw = after.raw
        else:
            assert after.raw == raw
    assert after.raw < 4 * 4  # compaction did run
    # OTHER's tail (one row per epoch) never reached 5 rows: never compacted
    assert after.other == Counter({("x", e): 1 for e in range(4)})
    assert after.tails[OTHER] == (0, 4)


def test_compaction_below_the_threshold_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", 100)
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 0, "A", {TRACE: [("a", 1, 1), ("a", 1, 1), ("a", 1, -1)]})
    compact_file(file)
    after = snapshot(file)
    assert after.raw == 3
    assert after.tails[TRACE] == (0, 3)


def test_roll_back_after_compaction_restores_the_previous_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", 1)
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 0, "A", {TRACE: [("a", 1, 1), ("b", 2, 3)]})
    compact_file(file)
    apply_epoch(file, 1, "B", {TRACE: [("a", 1, -1), ("b", 2, -1), ("b", 2, 1), ("c", 3, 1)]})
    compact_file(file)  # merges epoch 1's rows into the base
    compacted = snapshot(file)
    assert compacted.trace == Counter({("b", 2): 3, ("c", 3): 1})
    assert compacted.raw == 2
    assert roll_back_ahead(file, 0)
    assert snapshot(file).trace == Counter({("a", 1): 1, ("b", 2): 3})


def retracted(file: Path) -> dict[str, int]:
    con = open_partition(file, read_only=True)
    try:
        return dict(con.execute(f"SELECT target, retracted FROM {TAILS}").fetchall())
    finally:
        con.close()


def test_tails_count_retracting_rows(tmp_path: Path) -> None:
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 0, "A", {TRACE: [("a", 1, 1), ("b", 1, 2)]})
    apply_epoch(file, 1, "B", {TRACE: [("a", 1, -1), ("b", 1, -1), ("c", 1, 1)],
                               OTHER: [("x", 1, -1)]})
    assert retracted(file) == {TRACE: 2, OTHER: 1}
    assert snapshot(file).tails == {TRACE: (0, 5), OTHER: (0, 1)}


def test_a_load_of_inserts_in_many_epochs_is_never_compacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rewriting a partition's trace at every epoch of a load in epochs costs the whole load
    # each time; inserts drop nothing, so only retractions make a trace due.
    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", 2)
    file = tmp_path / "p.duckdb"
    for epoch in range(4):
        apply_epoch(file, epoch, f"t{epoch}", {TRACE: [(f"k{epoch}", i, 1) for i in range(3)]})
        compact_file(file)
    assert snapshot(file).tails[TRACE] == (0, 12)
    apply_epoch(file, 4, "t4", {TRACE: [(f"k{e}", i, -1) for e in range(2) for i in range(3)]})
    compact_file(file)  # 6 retractions drop 12 rows of 18: due
    after = snapshot(file)
    assert after.tails[TRACE] == (6, 0) and after.raw == 6
    assert retracted(file) == {TRACE: 0, OTHER: 0}


def test_a_partition_written_before_retractions_were_counted_is_upgraded(
    tmp_path: Path,
) -> None:
    file = tmp_path / "p.duckdb"
    apply_epoch(file, 0, "A", {TRACE: [("a", 1, 1)]})
    con = open_partition(file)
    try:
        con.execute(f"ALTER TABLE {TAILS} DROP COLUMN retracted")
    finally:
        con.close()
    apply_epoch(file, 1, "B", {TRACE: [("a", 1, -1)]})
    assert retracted(file) == {TRACE: 1, OTHER: 0}
    assert snapshot(file).trace == Counter()
