"""Faults at every fault point of ``ivm.faults``: kill -9, and a full disk (ENOSPC).

**kill -9.** A fork server (``fault_child``) forks a child per point; the child opens a
persistent state at epoch 1, arms the point to SIGKILL itself, and runs a fixed script
(ingest, CREATE VIEW, ingest, DROP VIEW, ALTER TABLE, close), noting each finished step. The
test then reopens the state and checks:

* the epoch is the last committed one: the epoch before the step that was killed for a
  point before COMMIT, that step's for a point after it (an epoch, or the DDL statement:
  the extra view exists exactly when its CREATE committed and its DROP did not);
* every table and view equals DuckDB recomputing it over an independent copy of the
  tables fed the committed batches (``soak_workload.Oracle``), and again after two more
  epochs;
* after a clean close, no temporary file is left in the state directory.

Each point runs against the views its code serves (operator points against a view with
that operator), so a kill costs a small state's epochs. ``make test`` kills at ``SAMPLE``,
a point of every kind (the name before its first ``.`` or ``:``) and of every place
against COMMIT; ``make test-deep`` at every point (the rest are marked ``deep``).

**ENOSPC.** In process: a trace append raising ``OSError(ENOSPC)`` fails the ingest with
an ``IvmError`` and changes nothing (tables, views, epoch), and the next epochs are
exact; a snapshot write raising it at close warns (``IvmWarning``), leaves no temporary
directory, and the next open rebuilds the indexes from the traces, exact; a compaction
raising it (compaction runs once the epoch has committed) rolls itself back and warns: the
ingest returns, the epoch stands, reopened and later epochs exact.

No file is left that a closed state does not hold (``state_files.assert_clean``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import fault_child
import pytest
from soak_oracle import Oracle, check_exact
from soak_workload import COLUMNS, DDL, VIEWS
from state_files import assert_clean, unexpected_files

import ivm
from ivm import faults
from ivm.storage import traces

pytestmark = pytest.mark.xdist_group("faults")
"""Under xdist, one worker runs the module: its module-scoped fixtures are made once."""

HERE = Path(__file__).parent

BEFORE, AFTER, EITHER = "before", "after", "either"
"""Where a point lies against the COMMIT of the step it kills."""

DEFAULT_VIEWS = ("by_region",)
"""An inner join under a GROUP BY: arrangements, row indexes, invertible aggregates."""

# point -> (where it lies against its step's COMMIT, the views it runs against, which call)
POINTS: dict[str, tuple[str, tuple[str, ...], int]] = {
    "open.connected": (EITHER, DEFAULT_VIEWS, 1),
    "snapshot.taken": (EITHER, DEFAULT_VIEWS, 1),
    "transaction.begun": (BEFORE, DEFAULT_VIEWS, 1),
    "checks.consolidated": (BEFORE, DEFAULT_VIEWS, 1),
    "checks.index": (BEFORE, DEFAULT_VIEWS, 2),
    "checks.rules": (BEFORE, DEFAULT_VIEWS, 1),
    "operator.sql": (BEFORE, DEFAULT_VIEWS, 5),
    "operator:aggregate": (BEFORE, ("by_region",), 1),
    "operator:join": (BEFORE, ("by_region",), 1),
    "operator:aggregate_per_key": (BEFORE, ("by_product",), 1),
    "operator:set_operation": (BEFORE, ("buyers_not_gold",), 1),
    "operator:top_k": (BEFORE, ("top_orders",), 1),
    "operator:fixed_point": (BEFORE, ("reachable",), 1),
    "operator:asof_join": (BEFORE, ("asof_value",), 1),
    "operator:distinct": (BEFORE, ("sold_products",), 1),
    "trace.append": (BEFORE, DEFAULT_VIEWS, 3),
    "trace.appended": (BEFORE, DEFAULT_VIEWS, 4),
    "commit.before": (BEFORE, DEFAULT_VIEWS, 1),
    "commit.after": (AFTER, DEFAULT_VIEWS, 1),
    "commit.actions": (AFTER, DEFAULT_VIEWS, 1),
    "arrangement.merge": (EITHER, DEFAULT_VIEWS, 1),
    "row_index.applied": (AFTER, DEFAULT_VIEWS, 1),
    "time_index.update": (BEFORE, ("asof_value",), 1),
    "compaction.begin": (AFTER, DEFAULT_VIEWS, 1),
    "compaction.commit": (AFTER, DEFAULT_VIEWS, 1),
    "ddl.catalog": (BEFORE, DEFAULT_VIEWS, 1),
    "ddl.traces": (BEFORE, DEFAULT_VIEWS, 1),
    "ddl.manifest": (BEFORE, DEFAULT_VIEWS, 1),
    "ddl.dropped": (BEFORE, DEFAULT_VIEWS, 1),
    "ddl.altered": (BEFORE, DEFAULT_VIEWS, 2),  # the script's second ALTER
    "snapshot.begin": (AFTER, DEFAULT_VIEWS, 1),
    "snapshot.array": (AFTER, DEFAULT_VIEWS, 3),
    "snapshot.manifest": (AFTER, DEFAULT_VIEWS, 1),
    "snapshot.renamed": (AFTER, DEFAULT_VIEWS, 1),
    "file.copy": (AFTER, DEFAULT_VIEWS, 1),
    "file.copied": (AFTER, DEFAULT_VIEWS, 1),
    "file.flushed": (AFTER, DEFAULT_VIEWS, 1),
}

SAMPLE = (
    "open.connected", "snapshot.taken", "transaction.begun", "ddl.manifest", "checks.rules",
    "operator:join", "trace.append", "commit.before", "commit.after", "arrangement.merge",
    "row_index.applied", "time_index.update", "compaction.commit", "snapshot.array",
    "file.copied",
)
"""The points ``make test`` kills at: one of every kind, the snapshot's at open and at
close, and COMMIT's both sides (``test_the_sample_covers_every_kind`` keeps it so)."""


def kind(point: str) -> str:
    """A point's kind: its name before the first ``.`` or ``:`` (``operator:join``:
    ``operator``)."""
    return point.split(":")[0].split(".")[0]


def sampled(points: list[str], sample: tuple[str, ...]) -> list[object]:
    """``points`` as parameters, those outside ``sample`` in the deep profile only."""
    return [p if p in sample else pytest.param(p, marks=pytest.mark.deep) for p in points]


def create_state(state: Path, views: tuple[str, ...]) -> None:
    """New state at ``state``: the soak's tables, ``views``, the first epoch; closed."""
    with ivm.connect(str(state)) as db:
        db.execute(DDL + ";".join(f"CREATE VIEW {n} AS {VIEWS[n]}" for n in views))
        db.ingest(fault_child.first_batches())


def oracle_at(epoch: int) -> Oracle:
    """The oracle fed the script's first ``epoch`` epochs."""
    oracle, drawn = Oracle(), fault_child.Workload(fault_child.SCALE, fault_child.SEED)
    oracle.apply(drawn.first())
    for _ in range(epoch - 1):
        oracle.apply(drawn.next())
    return oracle


def has_view(db: ivm.Session, name: str) -> bool:
    """Whether ``db`` has view ``name``."""
    try:
        db.read(name)
    except ivm.IvmError:
        return False
    return True


class Server:
    """The fork server (``fault_child``), started once for the module."""

    def __init__(self) -> None:
        paths = [str(HERE), str(HERE.parent.parent / "benchmarks"), *sys.path]
        self.process = subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.path[:0] = {paths!r}; "
             "import fault_child; fault_child.serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def run(self, state: Path, progress: Path, point: str, at: int) -> dict[str, int]:
        """Run the script in a child with ``point`` armed; how the child ended."""
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"state": str(state), "progress": str(progress), "point": point, "at": at}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def stop(self) -> None:
        """End the server (its stdin closed)."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """One fork server for every kill."""
    started = Server()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def base_states(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], Path]:
    """A closed state at epoch 1 per set of views, made at first use."""
    made: dict[tuple[str, ...], Path] = {}

    class States(dict):
        def __missing__(self, views: tuple[str, ...]) -> Path:
            state = tmp_path_factory.mktemp("base") / "state"
            create_state(state, views)
            self[views] = state
            return state

    return States(made)


def expected_after(point: str, finished: list[str]) -> tuple[int, bool]:
    """The epoch and whether the extra view exists, after the child was killed at
    ``point`` having finished the steps ``finished``."""
    where = POINTS[point][0]
    killed = fault_child.STEPS[len(finished)]
    steps = list(finished)
    if where == AFTER or (where == EITHER and killed.startswith(("open", "closed"))):
        steps.append(killed)
    epoch = max([1, *(int(s.split()[1]) for s in steps if s.startswith("epoch"))])
    return epoch, "create" in steps and "drop" not in steps


SPARK_KINDS = ("spark", "task")
"""Kinds of points on Spark mode's paths only: ``test_spark_faults`` kills at those."""


def test_the_sample_covers_every_kind() -> None:
    assert set(SAMPLE) <= set(POINTS)
    embedded = [p for p in faults.POINTS if kind(p) not in SPARK_KINDS]
    assert {kind(p) for p in SAMPLE} == {kind(p) for p in [*POINTS, *embedded]}
    assert {POINTS[p][0] for p in SAMPLE} == {BEFORE, AFTER, EITHER}


@pytest.mark.parametrize("point", sampled(list(POINTS), SAMPLE))
def test_killed_at_a_fault_point_reopens_exact(
    tmp_path: Path, server: Server, base_states: dict, point: str
) -> None:
    where, views, at = POINTS[point]
    state, progress = tmp_path / "state", tmp_path / "progress"
    shutil.copytree(base_states[views], state)
    ended = server.run(state, progress, point, at)
    error = progress.with_name("progress.error")
    assert ended == {"signal": 9}, (ended, error.read_text() if error.exists() else "")
    finished = progress.read_text().split("\n")[:-1] if progress.exists() else []
    finished = [" ".join(line.split()) for line in finished]
    epoch, extra = expected_after(point, finished)
    shown = {n: VIEWS[n] for n in views}
    with ivm.connect(str(state)) as db:
        if where == EITHER and db.epoch == epoch + 1:
            epoch += 1  # killed around a commit that was durable already
        assert db.epoch == epoch, (finished, db.epoch)
        assert has_view(db, "extra") == extra, finished
        if extra:
            shown["extra"] = fault_child.EXTRA
        oracle = oracle_at(epoch)
        check_exact(db, oracle, f"killed at {point} after {finished}", shown)
        drawn = fault_child.workload(epoch)
        for _ in range(2):
            batches = drawn.next()
            db.ingest(batches)
            oracle.apply(batches)
        check_exact(db, oracle, f"two epochs after the kill at {point}", shown)
        relations = [*db.tables, *db.views]
    assert_clean(state, relations)


@pytest.fixture
def armed() -> Iterator[None]:
    """Disarm every fault point after the test."""
    yield
    faults.disarm()


def snapshot(db: ivm.Session) -> dict[str, list]:
    """Every table's and view's rows, and the epoch."""
    names = [*COLUMNS, *DEFAULT_VIEWS]
    found: dict[str, list] = {n: sorted(map(repr, db.read(n).to_pylist())) for n in names}
    found["epoch"] = [db.epoch]
    return found


@pytest.mark.parametrize("point", sampled(["trace.append", "trace.appended"],
                                           ("trace.appended",)))
def test_a_full_disk_while_appending_to_a_trace_changes_nothing(
    tmp_path: Path, armed: None, point: str
) -> None:
    state = tmp_path / "state"
    create_state(state, DEFAULT_VIEWS)
    drawn = fault_child.workload(1)
    with ivm.connect(str(state)) as db:
        db.ingest(drawn.next())
        before = snapshot(db)
        faults.arm(point, "enospc", at=2)
        batches = drawn.next()
        with pytest.raises(ivm.IvmError, match="No space left on device") as raised:
            db.ingest(batches)
        assert not isinstance(raised.value, ivm.InternalError)  # the machine's, not a bug
        faults.disarm()
        assert snapshot(db) == before
        oracle = oracle_at(2)
        db.ingest(batches)  # the same batch again, now that the disk has room
        oracle.apply(batches)
        batches = drawn.next()
        db.ingest(batches)
        oracle.apply(batches)
        check_exact(db, oracle, f"after ENOSPC at {point}", {n: VIEWS[n] for n in DEFAULT_VIEWS})
    with ivm.connect(str(state)) as db:
        assert db.epoch == 4
        check_exact(db, oracle, "reopened", {n: VIEWS[n] for n in DEFAULT_VIEWS})
    assert_clean(state)


@pytest.mark.parametrize("point", sampled(["snapshot.begin", "snapshot.array",
                                            "snapshot.manifest"], ("snapshot.array",)))
def test_a_full_disk_while_saving_a_snapshot_warns_and_loses_nothing(
    tmp_path: Path, armed: None, point: str
) -> None:
    state = tmp_path / "state"
    create_state(state, DEFAULT_VIEWS)
    drawn = fault_child.workload(1)
    oracle = oracle_at(1)
    db = ivm.connect(str(state))
    batches = drawn.next()
    db.ingest(batches)
    oracle.apply(batches)
    faults.arm(point, "enospc")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db.close()
    faults.disarm()
    assert any(issubclass(w.category, ivm.IvmWarning) and "No space left" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    assert_clean(state)
    with ivm.connect(str(state)) as db:
        assert db.epoch == 2
        check_exact(db, oracle, f"after ENOSPC at {point}", {n: VIEWS[n] for n in DEFAULT_VIEWS})
        batches = drawn.next()
        db.ingest(batches)
        oracle.apply(batches)
        check_exact(db, oracle, "the next epoch", {n: VIEWS[n] for n in DEFAULT_VIEWS})


@pytest.mark.parametrize("point", sampled(["compaction.begin", "compaction.commit"],
                                           ("compaction.commit",)))
def test_a_full_disk_while_compacting_warns_and_keeps_the_epoch(
    tmp_path: Path, armed: None, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A compaction runs after its epoch committed: an error there must not say the ingest
    # failed (it applied), and the compaction's own transaction must leave no trace.
    state = tmp_path / "state"
    create_state(state, DEFAULT_VIEWS)
    monkeypatch.setattr(traces, "COMPACT_MIN_ROWS", 1)  # due after one small epoch
    monkeypatch.setattr(traces, "COMPACT_FRACTION", 0.05)
    drawn, oracle = fault_child.workload(1), oracle_at(1)
    views = {n: VIEWS[n] for n in DEFAULT_VIEWS}
    with ivm.connect(str(state)) as db:
        faults.arm(point, "enospc")
        batches = drawn.next()
        with pytest.warns(ivm.IvmWarning, match="compaction failed.*No space left on device"):
            deltas = db.ingest(batches)
        faults.disarm()
        oracle.apply(batches)
        assert db.epoch == 2 and set(deltas) == set(DEFAULT_VIEWS)
        check_exact(db, oracle, f"after ENOSPC at {point}", views)
        batches = drawn.next()  # compacts what is still due
        db.ingest(batches)
        oracle.apply(batches)
        check_exact(db, oracle, f"the epoch after ENOSPC at {point}", views)
    with ivm.connect(str(state)) as db:
        assert db.epoch == 3
        check_exact(db, oracle, "reopened", views)
        batches = drawn.next()
        db.ingest(batches)
        oracle.apply(batches)
        check_exact(db, oracle, "the epoch after reopening", views)
        relations = [*db.tables, *db.views]
    assert_clean(state, relations)


def test_fault_points_are_named_and_armed_only_by_name(armed: None) -> None:
    with pytest.raises(ValueError, match="unknown fault point"):
        faults.arm("no.such.point")
    with pytest.raises(ValueError, match="unknown fault action"):
        faults.arm("commit.before", "explode")
    faults.arm("operator:join", "enospc", at=2)
    faults.reached("operator", "aggregate")
    faults.reached("operator", "join")  # the first join: not yet
    with pytest.raises(OSError, match="No space left"):
        faults.reached("operator", "join")
    faults.reached("operator", "join")  # only the second call fires
    assert {p.split(":")[0] for p in POINTS} <= set(faults.POINTS)


def test_leftovers_in_a_closed_state_are_reported(tmp_path: Path) -> None:
    # The whitelist itself: what a closed state holds passes, and each kind of leftover
    # is named (else every fault test's last check could never fail).
    kept = ["ivm.duckdb", "fence", "ivm.duckdb.memory/manifest.json", "ivm.duckdb.memory/0.npy",
            "tables/t1-orders/table/part-00000.duckdb",
            "views/v3-by%20region/join-0123456789ab/part-00002.duckdb"]
    left = ["ivm.duckdb.wal", "ivm.duckdb.lock", "ivm.duckdb.rewrite", "fence.next",
            "ivm.duckdb.memory.new-7/0.npy", "ivm.duckdb.tmp/spill.block", "spool/abc/part-0.arrow",
            "tables/t1-orders/table/part-00000.duckdb.wal", "views/v4-extra/x/part-00000.duckdb"]
    for name in [*kept, *left]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    found = unexpected_files(tmp_path, ["orders", "by region"])
    tops = {line.split(" ")[0] for line in found}
    assert tops == {"ivm.duckdb.wal", "ivm.duckdb.lock", "ivm.duckdb.rewrite", "fence.next",
                    "ivm.duckdb.memory.new-7", "ivm.duckdb.tmp", "spool/abc", "views/v4-extra",
                    "tables/t1-orders/table/part-00000.duckdb.wal", "views/v4-extra/x"}, found
    (tmp_path / "tables/t2-orders/table").mkdir(parents=True)
    assert any("a second directory of 'orders'" in line for line in unexpected_files(tmp_path))
