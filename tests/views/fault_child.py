"""The child side of the kill -9 tests (``test_faults``): a fork server and the script it runs.

The server (``python fault_child.py``) imports ivm once and opens no database, so it can
fork safely; for each JSON line on stdin (``{"state", "progress", "point", "at"}``) it
forks a child that arms the point to SIGKILL itself and runs ``script`` against the
state, writing each finished step to the progress file; it answers one JSON line:
``{"signal": n}`` when the child was killed, ``{"exit": n}`` otherwise (3: the point
was never reached). Forking saves each kill the ≈1 s of importing ivm afresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from soak_workload import Scale, Workload

import ivm
from ivm import faults
from ivm.storage import file_rewrite, traces

SCALE = Scale(customers=40, products=12, orders=300, quotes_per_epoch=4, live_quotes=40,
              batch_sizes=(30, 60))
"""Small: a kill test is about where the process dies, not about volume."""
SEED = 7
EXTRA = "SELECT region, COUNT(*) AS n FROM customers GROUP BY region"
"""The view the script creates and drops (DDL points)."""

STEPS: tuple[str, ...] = (
    "open", "epoch 2", "rejected", "epoch 3", "create", "epoch 4", "drop", "alter", "closed",
)
"""What the script does, in order; the progress file lists the steps finished. ``rejected``
is a batch deleting an order that is not there: the row index cannot vouch for it, so
it is checked in SQL, and refused. ``alter`` adds a column to ``orders`` and drops it in
one script (``ALTERED``): its rows are rewritten twice and the views reading it planned
and filled again, and the table ends as it was, so the epochs after are the same."""
ALTERED = "ALTER TABLE orders ADD COLUMN note VARCHAR; ALTER TABLE orders DROP COLUMN note"
MISSING = {"orders": [{"id": -1, "customer": 0, "product": 0, "amount": 1, "ts": 0, "__w": -1}]}


def workload(epochs: int) -> Workload:
    """The workload after its first ``epochs`` (at least 1) epochs were drawn: the
    batches it gives next are the script's next ones."""
    drawn = Workload(SCALE, SEED)
    drawn.first()
    for _ in range(epochs - 1):
        drawn.next()
    return drawn


def first_batches() -> dict:
    """Epoch 1's batches: the tables' first load."""
    return Workload(SCALE, SEED).first()


def script(state: str, progress: str) -> None:
    """Open the state (at epoch 1), ingest, create and drop a view, ingest, close; each
    finished step is appended to ``progress``."""
    done = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    note = lambda step: os.write(done, f"{step}\n".encode())  # noqa: E731
    drawn = workload(1)
    db = ivm.connect(state)
    note("open")
    for step in STEPS[1:-1]:
        if step == "create":
            db.execute(f"CREATE VIEW extra AS {EXTRA}")
        elif step == "drop":
            db.execute("DROP VIEW extra")
        elif step == "alter":
            db.execute(ALTERED)
        elif step == "rejected":
            with contextlib.suppress(ivm.ConstraintError):
                db.ingest(MISSING)
        else:
            db.ingest(drawn.next())
        note(step)
    db.close()
    note("closed")


def serve() -> None:
    """Fork a child per request line (see the module docstring)."""
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                # compaction due after a few small epochs (it needs 50k rows otherwise)
                traces.COMPACT_MIN_ROWS, traces.COMPACT_FRACTION = 1, 0.05
                # and the state file rewritten at every close, however few blocks are free
                file_rewrite.REWRITE_MIN_BYTES, file_rewrite.REWRITE_FREE_SHARE = 0, 0.0
                faults.arm(request["point"], "kill", request.get("at", 1))
                script(request["state"], request["progress"])
                os._exit(3)  # not reached
            except BaseException as error:  # noqa: BLE001 - the child reports and exits
                Path(request["progress"] + ".error").write_text(repr(error))
                os._exit(4)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            answer = {"signal": os.WTERMSIG(status)}
        else:
            answer = {"exit": os.WEXITSTATUS(status)}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    serve()
