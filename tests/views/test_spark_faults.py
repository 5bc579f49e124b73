"""Spark mode under faults (issue #28, item 3): a driver killed -9 mid-epoch and mid-DDL,
and a task killed -9 after committing its partition.

**A driver killed.** A child process (``spark_fault_child``) runs a Spark driver of its
own over a copy of a Spark-mode state at epoch 1 (the soak's orders and customers,
``by_region``) and a fixed script (ingest, CREATE VIEW, a streamed ingest, a failed
ingest, ingest, DROP VIEW, close). It dies at one moment of it (``CASES``): a fault point
armed on the driver (``ivm.faults``), or, mid-job, with the whole process group (driver,
JVM, Python workers) killed while a task that has written its partitions is paused.
Where the case leaves partitions ahead of the driver, a stray directory or a spooled
batch, the test first checks they are there. Then it reopens the state on the test
session's Spark and checks:

* the epoch is the last committed one, and the extra view exists exactly when its CREATE
  committed and its DROP did not;
* no partition file stands at an epoch past it: those that committed ahead of the driver
  (checked to be there, for the cases that leave some) were rolled back;
* every table and view equals DuckDB recomputing it (``soak_oracle.Oracle``), and again
  after two more epochs;
* after a clean close, the state holds nothing a closed state does not
  (``state_files.assert_clean``): no WAL, no fence staged, no spool, no directory of a
  DDL that never committed or of a drop that was never cleaned up.

**A task killed.** On the test session's Spark (``local[2,4]``: four attempts per task),
a point armed in the tasks (``faults.arm_tasks``, ``once=`` a file so that only the
first task to reach it dies) kills the Python worker right after its partition's
transaction committed (or inside it, before COMMIT): Spark runs the task again, and the
retry finds its epoch applied and re-emits the stored change. The view and the delta
ingest returned are exact (applied once), and the next epoch too.

Each driver kill starts a JVM (≈10 s on the 2-core machine): ``make test`` kills at
``SAMPLE``, the rest are ``deep``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fault_child
import pytest
import spark_fault_child
from oracle.spark import SPARK_PARTITIONS
from soak_oracle import Oracle, mismatch
from soak_workload import VIEWS
from spark_fault_child import TABLES, TABLES_DDL, batches_of
from state_files import assert_clean, partition_epochs
from test_faults import oracle_at, sampled

import ivm
from ivm import faults

pytestmark = pytest.mark.xdist_group("spark_faults")
"""Under xdist, one worker runs the module: its base state is made once."""

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
BEFORE, AFTER = "before", "after"
VIEW = "by_region"

# case: (driver point or None, which call of it, a stage to pause in instead, the step it
# kills, where it lies against that step's COMMIT)
CASES: dict[str, tuple[str | None, int, str | None, str, str]] = {
    "open.connected": ("open.connected", 1, None, "open", BEFORE),
    "spark.epoch": ("spark.epoch", 1, None, "epoch 2", BEFORE),
    "epoch mid-job": (None, 1, f"-{VIEW}/", "epoch 2", BEFORE),
    "spark.collected": ("spark.collected", 1, None, "epoch 2", BEFORE),
    "transaction.begun": ("transaction.begun", 1, None, "epoch 2", BEFORE),
    "commit.before": ("commit.before", 1, None, "epoch 2", BEFORE),
    "commit.after": ("commit.after", 1, None, "epoch 2", AFTER),
    "commit.actions": ("commit.actions", 1, None, "epoch 2", AFTER),
    "ddl.catalog": ("ddl.catalog", 1, None, "create", BEFORE),
    "create mid-job": (None, 1, "-extra/", "create", BEFORE),
    "spark.backfilled": ("spark.backfilled", 1, None, "create", BEFORE),
    "ddl.manifest": ("ddl.manifest", 1, None, "create", BEFORE),
    "create commit.after": ("commit.after", 2, None, "create", AFTER),
    "spark.rolled_back": ("spark.rolled_back", 1, None, "failed", BEFORE),
    "streamed spark.collected": ("spark.collected", 2, None, "epoch 3", BEFORE),
    "ddl.dropped": ("ddl.dropped", 1, None, "drop", BEFORE),
    "drop commit.after": ("commit.after", 5, None, "drop", AFTER),
}
SAMPLE = ("spark.collected", "spark.backfilled")
"""The driver kills ``make test`` runs: partitions that committed an epoch ahead of the
driver, and a new view's partition files written under a CREATE never committed."""
AHEAD = ("epoch mid-job", "spark.collected", "transaction.begun", "commit.before",
         "spark.rolled_back", "streamed spark.collected")
"""Cases whose kill leaves partitions at an epoch the driver never committed."""
STRAY = ("create mid-job", "spark.backfilled", "ddl.manifest", "drop commit.after")
"""Cases whose kill leaves a directory of the extra view that the catalog does not hold."""
SPOOLED = ("streamed spark.collected",)
"""Cases whose kill leaves a streamed batch spooled under the state."""
WAIT_SECONDS = 400.0


@pytest.fixture(scope="module")
def base_state(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed Spark-mode state at epoch 1: the soak's tables and ``by_region``."""
    state = tmp_path_factory.mktemp("spark-base") / "state"
    with ivm.connect(state, spark=spark, partitions=SPARK_PARTITIONS) as db:
        db.execute(f"{TABLES_DDL}; CREATE VIEW {VIEW} AS {VIEWS[VIEW]}")
        db.ingest(batches_of(fault_child.first_batches()))
    return state


def check_exact(db: ivm.Session, oracle: Oracle, where: str, views: dict[str, str]) -> None:
    """The state's tables and ``views`` equal the oracle's (AssertionError naming the first
    that does not)."""
    for name in TABLES:
        found = mismatch(oracle.table(name), db.read(name))
        assert found is None, f"{where}: table {name}: {found}"
    for name, sql in views.items():
        found = mismatch(oracle.view(name, sql), db.read(name))
        assert found is None, f"{where}: view {name}: {found}"


def ingest(db: ivm.Session, oracle: Oracle, batches: dict) -> dict:
    """One epoch of the workload (its tables the state holds) in ``db`` and in the oracle."""
    deltas = db.ingest(batches_of(batches))
    oracle.apply(batches)
    return deltas



def extra_directories(state: Path) -> list[Path]:
    """The directories of the extra view, whoever holds them."""
    return list((state / "views").glob("v*-extra"))


def group_alive(group: int) -> bool:
    """Whether a live (not zombie) process is left in process group ``group``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        fields = text.rsplit(")", 1)[-1].split()  # after the command name: state, ppid, pgrp
        if len(fields) > 2 and int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


def run_child(state: Path, progress: Path, point: str | None, at: int,
              pause: str | None) -> int:
    """Run the child driver (module docstring) and see it die; returns its exit status
    (negative: the signal). Whatever it started (its JVM, Python workers) is killed too,
    its process group, and gone before this returns: nothing of it writes afterwards."""
    marker = progress.with_name("markers")
    marker.mkdir()
    request = {"state": str(state), "progress": str(progress), "point": point, "at": at,
               "pause": {"stage": pause, "marker": str(marker)} if pause else None}
    paths = [str(ROOT), str(ROOT / "tests"), str(HERE), str(ROOT / "benchmarks")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    log = progress.with_name("child.log")
    with log.open("w") as output:
        child = subprocess.Popen(
            [sys.executable, str(HERE / "spark_fault_child.py"), json.dumps(request)],
            env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        paused = marker / "paused"
        while child.poll() is None and time.monotonic() < deadline:
            if pause and paused.exists() and paused.read_text():
                os.killpg(child.pid, signal.SIGKILL)  # the driver's machine dies
            time.sleep(0.1)
    finally:
        with_group = child.poll() is None or group_alive(child.pid)
        if with_group:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        while group_alive(child.pid) and time.monotonic() < deadline + 60:
            time.sleep(0.1)
    assert not group_alive(child.pid), "the child's JVM or workers outlived it"
    error = progress.with_name("progress.error")
    detail = error.read_text() if error.exists() else log.read_text()[-4000:]
    assert child.returncode == -signal.SIGKILL, (child.returncode, detail)
    return child.returncode


def expected_after(case: str, finished: list[str]) -> tuple[int, bool]:
    """The last committed epoch, and whether the extra view exists, after the child was
    killed in ``case`` having finished ``finished``."""
    *_, step, where = CASES[case]
    killed = spark_fault_child.STEPS[len(finished)]
    assert killed == step, f"{case} killed {killed!r}, not {step!r} (after {finished})"
    steps = [*finished, killed] if where == AFTER else list(finished)
    epoch = max([1, *(int(s.split()[1]) for s in steps if s.startswith("epoch"))])
    return epoch, "create" in steps and "drop" not in steps


@pytest.mark.parametrize("case", sampled(list(CASES), SAMPLE))
def test_a_driver_killed_mid_epoch_reopens_exact(
    case: str, spark: Any, base_state: Path, tmp_path: Path
) -> None:
    point, at, pause, _, _ = CASES[case]
    state, progress = tmp_path / "state", tmp_path / "progress"
    shutil.copytree(base_state, state)
    run_child(state, progress, point, at, pause)
    finished = progress.read_text().split("\n")[:-1] if progress.exists() else []
    epoch, extra = expected_after(case, finished)
    if case in AHEAD:  # what the reopen must reconcile
        assert max(partition_epochs(state)) == epoch + 1, partition_epochs(state)
    if case in STRAY:
        assert extra_directories(state), "no directory of the extra view was left"
    if case in SPOOLED:
        assert list((state / "spool").iterdir()), "no spooled batch was left"
    views = {VIEW: VIEWS[VIEW], **({"extra": fault_child.EXTRA} if extra else {})}
    with ivm.connect(state, spark=spark) as db:
        assert db.epoch == epoch, (finished, db.epoch)
        assert ("extra" in db.views) == extra, finished
        assert max(partition_epochs(state)) <= epoch, partition_epochs(state)
        oracle = oracle_at(epoch)
        check_exact(db, oracle, f"killed at {case} after {finished}", views)
        drawn = fault_child.workload(epoch)
        for _ in range(2):
            ingest(db, oracle, drawn.next())
        check_exact(db, oracle, f"two epochs after the kill at {case}", views)
        relations = [*db.tables, *db.views]
    assert_clean(state, relations)


def test_every_spark_point_has_a_case() -> None:
    driver = {p for p in faults.POINTS if p.startswith("spark.")}
    assert driver <= {c[0] for c in CASES.values()}
    assert set(SAMPLE) <= set(CASES) and {*AHEAD, *STRAY, *SPOOLED} <= set(CASES)


# -- a task killed --------------------------------------------------------------------------


@pytest.fixture
def armed() -> Iterator[None]:
    """Disarm every fault point, here and for tasks, after the test."""
    yield
    faults.disarm()


def as_delta(before: Any, after: Any) -> Counter[tuple]:
    """The change from view contents ``before`` to ``after``, by row: its weight."""
    change: Counter[tuple] = Counter(tuple(r.values()) for r in after.to_pylist())
    change.subtract(Counter(tuple(r.values()) for r in before.to_pylist()))
    return Counter({row: weight for row, weight in change.items() if weight})


def delta_of(table: Any) -> Counter[tuple]:
    """An ingest's delta (columns, then ``__w``) by row: its weight."""
    return Counter({tuple(r[c] for c in table.column_names if c != "__w"): r["__w"]
                    for r in table.to_pylist()})


TASK_POINTS = ["task.committed", "task.committed:aggregate", "task.committed:join",
               "task.applied"]


@pytest.mark.parametrize("point", sampled(TASK_POINTS, ("task.committed:aggregate",)))
def test_a_task_killed_after_committing_its_partition_applies_once(
    point: str, spark: Any, base_state: Path, tmp_path: Path, armed: None
) -> None:
    state, killed = tmp_path / "state", tmp_path / "killed"
    shutil.copytree(base_state, state)
    drawn, oracle = fault_child.workload(1), oracle_at(1)
    with ivm.connect(state, spark=spark) as db:
        faults.arm_tasks(point, "kill", once=killed)
        before = oracle.view(VIEW)
        deltas = ingest(db, oracle, drawn.next())
        faults.disarm()
        assert killed.exists() and int(killed.read_text()) != os.getpid(), "no task died"
        assert db.epoch == 2 and max(partition_epochs(state)) == 2
        assert delta_of(deltas[VIEW]) == as_delta(before, oracle.view(VIEW))
        check_exact(db, oracle, f"a task killed at {point}", {VIEW: VIEWS[VIEW]})
        ingest(db, oracle, drawn.next())
        check_exact(db, oracle, f"the epoch after a task killed at {point}", {VIEW: VIEWS[VIEW]})
        relations = [*db.tables, *db.views]
    assert_clean(state, relations)


@pytest.mark.parametrize("once", sampled([False, True], (False,)))
def test_a_full_disk_in_a_task_fails_the_ingest_cleanly(
    once: bool, spark: Any, base_state: Path, tmp_path: Path, armed: None
) -> None:
    # ENOSPC as a task writes its partition: on every attempt, the ingest fails with an
    # ExecutionError (the machine's, not ivm's bug) and nothing changes; once only (a
    # disk with room again when Spark retries), the epoch applies once.
    state = tmp_path / "state"
    shutil.copytree(base_state, state)
    drawn, oracle = fault_child.workload(1), oracle_at(1)
    with ivm.connect(state, spark=spark) as db:
        batches = drawn.next()
        faults.arm_tasks("task.applied:join", "enospc", once=tmp_path / "full" if once else None)
        if once:
            ingest(db, oracle, batches)
        else:
            with pytest.raises(ivm.ExecutionError, match="No space left on device") as raised:
                db.ingest(batches_of(batches))
            assert not isinstance(raised.value, ivm.InternalError), raised.value
            assert db.epoch == 1 and max(partition_epochs(state)) == 1
            check_exact(db, oracle, "after ENOSPC in every attempt", {VIEW: VIEWS[VIEW]})
            faults.disarm()
            ingest(db, oracle, batches)  # the same batch, the disk with room again
        faults.disarm()
        assert db.epoch == 2
        check_exact(db, oracle, "after ENOSPC in a task", {VIEW: VIEWS[VIEW]})
        relations = [*db.tables, *db.views]
    assert_clean(state, relations)
