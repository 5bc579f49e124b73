"""A process killed (SIGKILL) at any point of an epoch reopens at the last committed
epoch, exact: inside the epoch's transaction, while its rows go into the arrangements
after the commit, while traces are compacted, and after indexes were saved at an
earlier close and the state moved on (the saved indexes are then stale).

A child process opens a persistent session, ingests the batches, and kills itself
where the test says (a hook wrapped around an internal step, as a crash there would
strike); it prints each epoch once ingest returned. The test then reopens the state
and compares every table and view with an in-memory session fed the committed batches,
and with one more epoch applied to both."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from oracle.rows import rows

import ivm

pytestmark = pytest.mark.xdist_group("crash")
"""Under xdist, one worker runs the module: its module-scoped fixtures are made once."""

DDL = """
    CREATE TABLE customers (id BIGINT PRIMARY KEY, region VARCHAR);
    CREATE TABLE orders (id BIGINT PRIMARY KEY, customer BIGINT, amount DECIMAL(12,2));
    CREATE VIEW by_region AS SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n
        FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region;
    CREATE VIEW per_customer AS SELECT customer, MAX(amount) AS top, COUNT(*) AS n
        FROM orders GROUP BY customer;
"""
NAMES = ("customers", "orders", "by_region", "per_customer")


def batch(epoch: int) -> dict[str, list[dict]]:
    """Epoch ``epoch``'s changes: new customers and orders, an order of the epoch before
    deleted, a customer moved (so orders are read by customer, through an arrangement)."""
    orders = [{"id": 10 * epoch + i, "customer": i % 4, "amount": 3 * epoch + i, "__w": 1}
              for i in range(6)]
    if epoch > 0:
        orders.append({"id": 10 * (epoch - 1), "customer": 0, "amount": 3 * (epoch - 1),
                       "__w": -1})
    changes = {"orders": orders}
    if epoch == 0:
        changes["customers"] = [{"id": i, "region": region(i, 0), "__w": 1} for i in range(4)]
    else:
        moved = epoch % 4
        changes["customers"] = [{"id": moved, "region": region(moved, epoch - 1), "__w": -1},
                                {"id": moved, "region": region(moved, epoch), "__w": 1}]
    return changes


def region(customer: int, epoch: int) -> str:
    """The region of ``customer`` after epoch ``epoch`` (it moves at epochs ``customer``
    modulo 4, from epoch 1 on)."""
    moves = [e for e in range(1, epoch + 1) if e % 4 == customer]
    return f"r{moves[-1]}" if moves else "home"


CHILD = textwrap.dedent('''
    import os, signal, sys
    sys.path[:0] = {paths!r}
    import ivm
    from test_crash import DDL, batch
    import importlib

    state, start, stop, kill_at = {state!r}, {start}, {stop}, {kill_at}
    owner = getattr(importlib.import_module({module!r}), {owner!r}) if {owner!r} else None
    original = getattr(owner, {attribute!r}) if owner else None
    calls = [0]

    def crash(*args, **kwargs):
        calls[0] += 1
        if calls[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    if owner:
        setattr(owner, {attribute!r}, crash)
    db = ivm.connect(state)
    if start == 0:
        db.execute(DDL)
    for epoch in range(start, stop):
        db.ingest(batch(epoch))
        print(epoch, flush=True)
    db.close()
''')


def run_child(state: Path, start: int, stop: int, hook: tuple[str, str, str] | None = None,
              kill_at: int = 1) -> list[int]:
    """Run the child; the epochs it finished."""
    module, owner, attribute = hook or ("ivm", "", "")
    code = CHILD.format(paths=[str(Path(__file__).parent), *sys.path], module=module,
                        owner=owner, attribute=attribute, state=str(state), start=start,
                        stop=stop, kill_at=kill_at)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    if hook is None and done.returncode != 0:
        raise AssertionError(done.stderr)
    return [int(line) for line in done.stdout.split()]


def check_reopened(state: Path, epochs: int) -> None:
    """The reopened state equals a session fed the first ``epochs`` batches, before and
    after one more epoch."""
    expected = ivm.connect()
    expected.execute(DDL)
    with ivm.connect(state) as db:
        for epoch in range(epochs):
            expected.ingest(batch(epoch))
        assert db.epoch == expected.epoch
        for name in NAMES:
            assert rows(db.read(name)) == rows(expected.read(name)), name
        db.ingest(batch(epochs))
        expected.ingest(batch(epochs))
        for name in NAMES:
            assert rows(db.read(name)) == rows(expected.read(name)), name
    expected.close()


HOOKS = {
    # (module, class, method), and which call of it kills
    "mid_epoch_state_append": (("ivm.execution.arrangements", "Arrangements", "append"), 3),
    "arrangements_after_commit": (("ivm.execution.arrangements", "Arrangements", "committed"), 2),
    "compaction": (("ivm.storage.traces", "Compactor", "compact_due"), 3),
}


@pytest.fixture(scope="module")
def closed_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """State after two epochs, closed: its indexes saved with it."""
    state = tmp_path_factory.mktemp("crash") / "state"
    run_child(state, 0, 2)
    return state


@pytest.mark.parametrize("where", list(HOOKS))
def test_killed_mid_epoch_reopens_at_the_last_committed_epoch(
    tmp_path: Path, closed_state: Path, where: str
) -> None:
    state = tmp_path / "state"
    shutil.copytree(closed_state, state)
    hook, kill_at = HOOKS[where]
    finished = run_child(state, 2, 8, hook, kill_at)
    assert len(finished) < 6, "the child was to be killed"
    # An epoch whose commit the kill interrupted may or may not have committed: the
    # reopened epoch says which, and must be one of the two.
    with ivm.connect(state) as db:
        committed = db.epoch
    assert committed in (2 + len(finished), 2 + len(finished) + 1)
    check_reopened(state, committed)
