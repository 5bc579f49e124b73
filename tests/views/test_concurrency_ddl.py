"""Concurrency beyond ingest (issue #28, item 4), embedded mode: readers (``read``, ``sql``)
and subscribers on other threads while the session runs DDL (CREATE VIEW filling a view,
DROP VIEW, ALTER TABLE), compacts its traces, or closes. Each call sees the last committed
state, or fails with a clear ``IvmError`` (a view not created yet or dropped: ``SqlError``;
a closed session: ``StateError``); none crashes, hangs or sees a half-applied state. A
subscriber's snapshot plus its deltas is the view, and a DDL that changes what its view
holds ends the subscription (``views.changefeeds``). Spark mode: ``test_concurrency.py``.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from concurrency_helpers import (
    CONSISTENT,
    DDL,
    ROWS,
    Checks,
    Loops,
    committed_epoch,
    epoch_batch,
    feed_contents,
)

import ivm
import ivm.storage.traces

BIG = 50_000
"""Rows of ``big``: a view over it takes a while to fill (its CREATE VIEW is in flight)."""
GROUPS = 7
EXTRA = """
    CREATE VIEW extra AS SELECT k, COUNT(*) AS n FROM t GROUP BY k;
    CREATE VIEW big_g AS SELECT g, COUNT(*) AS n, SUM(id) AS s FROM big GROUP BY g;
"""
BIG_G = sorted((g, len(range(g, BIG, GROUPS)), sum(range(g, BIG, GROUPS))) for g in range(GROUPS))


def big_batch() -> pa.Table:
    return pa.table({"id": pa.array(range(BIG), pa.int64()),
                     "g": pa.array([i % GROUPS for i in range(BIG)], pa.int64())})


def big_g(db: ivm.Session) -> str:
    """``big_g``'s rows, all of them (as ``BIG_G``), or its absence."""
    try:
        read = db.sql("SELECT g, n, s FROM big_g ORDER BY g").to_pylist()
    except ivm.SqlError as error:
        assert "big_g" in str(error), error
        return "absent"
    assert [(r["g"], r["n"], r["s"]) for r in read] == BIG_G
    return "present"


def test_readers_and_subscribers_during_ddl(tmp_path: Path) -> None:
    with ivm.connect(tmp_path / "state") as db:
        db.execute(DDL + "; CREATE TABLE big (id BIGINT PRIMARY KEY, g BIGINT)")
        db.ingest({"t": epoch_batch(1), "big": big_batch()})
        checks = Checks(db)
        loops = Loops({"sql": checks.sql, "table": checks.table, "extra": checks.extra,
                       "big_g": lambda: big_g(db), "subscribe": checks.subscribe},
                      pause=0.05).start()
        epoch, rounds = 1, []
        with pytest.warns(ivm.IvmWarning, match="ended: the view was dropped"):
            for _ in range(2):
                first = len(checks.feeds)
                db.execute(EXTRA)
                epoch += 1
                db.ingest("t", epoch_batch(epoch))
                db.execute("ALTER TABLE t ADD COLUMN z INTEGER")  # extra refilled, the same
                db.execute("ALTER TABLE t DROP COLUMN z")
                rounds.append((epoch, checks.feeds[first:]))
                db.execute("DROP VIEW extra; DROP VIEW big_g")
        outcomes = loops.check()
    for name in ("sql", "table"):
        assert outcomes[name] == sorted(outcomes[name]) and outcomes[name][-1] == epoch
    for name in ("extra", "big_g"):
        assert {"absent", "present"} <= set(outcomes[name]), Counter(outcomes[name])
    assert sum(len(feeds) for _, feeds in rounds) > 1, Counter(outcomes["subscribe"])
    for at, feeds in rounds:  # snapshot + deltas = the view as dropped; then it ended
        for subscription, feed in feeds:
            assert feed_contents(feed) == Counter({(at, ROWS): 1}), feed
            assert subscription.ended == "the view was dropped"


def test_a_subscription_ends_when_a_ddl_changes_its_view() -> None:
    with ivm.connect() as db:
        db.execute(DDL)
        db.ingest("t", epoch_batch(1))
        by_k = db.subscribe("by_k", lambda e, d: None)
        db.execute("ALTER TABLE t ADD COLUMN z INTEGER")  # by_k refilled, the same rows
        with pytest.warns(ivm.IvmWarning, match="other contents"):
            db.execute("CREATE OR REPLACE VIEW by_k AS SELECT k, 2 AS n FROM t GROUP BY k")
        assert not by_k.active and by_k.ended == "a DDL gave the view other contents"
        feed: list[tuple[int, pa.Table]] = []
        totals = db.subscribe("totals", lambda e, d: feed.append((e, d)))
        again = f"CREATE VIEW totals AS {db.views['totals'].sql}"
        db.execute(f"DROP VIEW totals; {again}")  # the same contents again: it goes on
        with pytest.raises(ivm.SqlError):  # rolled back: nothing ends
            db.execute("DROP VIEW totals; CREATE VIEW bad AS SELECT nope FROM t")
        db.ingest("t", [{"id": 1000, "k": 1, "z": None}])
        assert totals.active and [e for e, _ in feed] == [1, 2]
        assert feed[1][1].to_pylist() == [{"n": ROWS, "total": ROWS, "squares": ROWS,
                                           "__w": -1}, {"n": ROWS + 1, "total": ROWS + 1,
                                                         "squares": ROWS + 1, "__w": 1}]
        with pytest.warns(ivm.IvmWarning, match="dropped"):
            db.execute("DROP VIEW totals")
        assert totals.ended == "the view was dropped"


def on_another_thread(call: Any) -> Any:
    """What ``call()`` returns (or raises) when run on another thread, waited for."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as error:  # noqa: BLE001 - handed back
            result.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert result, "the call on another thread hangs"
    return result[0]


def reads_at(point: str, monkeypatch: pytest.MonkeyPatch, reads: dict[str, Any]
             ) -> dict[str, list[Any]]:
    """At every ``faults.reached(point)``, each of ``reads`` run on another thread; what
    each returned (or raised), in turn."""
    seen: dict[str, list[Any]] = {name: [] for name in reads}
    reached = ivm.faults.reached

    def reach(name: str, *detail: Any) -> None:
        if name == point:
            for what, read in reads.items():
                seen[what].append(on_another_thread(read))
        reached(name, *detail)

    monkeypatch.setattr(ivm.faults, "reached", reach)
    return seen


def test_a_read_during_a_ddl_sees_the_last_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    with ivm.connect() as db:
        db.execute(DDL)
        db.ingest("t", epoch_batch(1))
        seen = reads_at("commit.before", monkeypatch, {
            "by_k": lambda: db.read("by_k").to_pylist(),
            "sql": lambda: committed_epoch(db.sql(CONSISTENT).to_pylist()[0]),
            "extra": lambda: db.read("extra"),
            "t": lambda: db.read("t").column_names})
        db.execute("DROP VIEW by_k; CREATE VIEW extra AS SELECT k FROM t; "
                   "ALTER TABLE t ADD COLUMN z INTEGER")
        monkeypatch.undo()
    assert seen["by_k"] == [[{"k": 1, "n": ROWS}]]  # still there until the DROP commits
    assert seen["sql"] == [1] and seen["t"] == [["id", "k"]]
    (error,) = seen["extra"]  # not there until the CREATE commits
    assert isinstance(error, ivm.SqlError) and "no table or view named 'extra'" in str(error)


@pytest.fixture
def small_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ivm.storage.traces, "COMPACT_MIN_ROWS", 4)


def test_readers_during_compaction(tmp_path: Path, small_compaction: None,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with ivm.connect(tmp_path / "state") as db:
        db.execute(DDL)
        db.ingest("t", epoch_batch(1))
        checks = Checks(db)
        loops = Loops({"sql": checks.sql, "table": checks.table}, pause=0.05).start()
        for epoch in range(2, 11):
            db.ingest("t", epoch_batch(epoch))
        seen = reads_at("compaction.commit", monkeypatch, {"sql": checks.sql,
                                                            "table": checks.table})
        for epoch in range(11, 16):
            db.ingest("t", epoch_batch(epoch))
        outcomes = loops.check()
        assert seen["sql"] and seen["sql"] == seen["table"], seen  # a rewrite in flight
        assert all(isinstance(e, int) for e in seen["sql"]), seen
        assert any(s.base > 0 for s in db._compactor.sizes.values()), "nothing compacted"
        for name in ("sql", "table"):
            assert outcomes[name] == sorted(outcomes[name]) and len(set(outcomes[name])) > 1


def test_readers_while_the_session_closes(tmp_path: Path) -> None:
    for round_ in range(6):
        db = ivm.connect(tmp_path / f"state{round_}")
        db.execute(DDL)
        db.ingest("t", epoch_batch(1))
        checks = Checks(db)
        started = threading.Barrier(2)

        def ingest(db: ivm.Session = db, started: threading.Barrier = started) -> None:
            started.wait()
            with contextlib.suppress(ivm.StateError):  # closed between two epochs
                for epoch in range(2, 6):
                    db.ingest("t", epoch_batch(epoch))

        writer = threading.Thread(target=ingest)
        loops = Loops({"sql": checks.sql, "table": checks.table, "subscribe": checks.subscribe,
                       "long": checks.long}, ends=(ivm.StateError,)).start()
        writer.start()
        started.wait()
        db.close()
        writer.join(timeout=60)
        outcomes = loops.check()
        for name, seen in outcomes.items():
            assert isinstance(seen[-1], ivm.StateError), (name, seen[-3:])
            assert "closed" in str(seen[-1])
