"""The lock on a state directory (``ivm.storage.state_lock``): one holder, named to
whoever else asks, and nothing left behind once it is released."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from ivm.errors import StateError
from ivm.storage.state_lock import StateLock, describe_holder, lock_path


def test_a_held_lock_refuses_another_naming_its_holder(tmp_path: Path) -> None:
    state = tmp_path / "ivm.duckdb"
    held = StateLock.acquire(state, tmp_path)
    assert held is not None
    record = json.loads(lock_path(state).read_text())
    assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
    with pytest.raises(StateError) as refused:  # another open file: flock refuses it too
        StateLock.acquire(state, tmp_path)
    text = str(refused.value)
    assert f"process {os.getpid()} on this host" in text and "running" in text
    held.release()
    assert not lock_path(state).exists()
    again = StateLock.acquire(state, tmp_path)  # free once released
    assert again is not None
    again.release()
    again.release()  # twice: nothing


def test_a_stale_lock_file_of_a_dead_holder_is_taken_over(tmp_path: Path) -> None:
    state = tmp_path / "ivm.duckdb"
    lock_path(state).write_text(json.dumps({"pid": 1, "host": "elsewhere"}))  # nobody holds it
    lock = StateLock.acquire(state, tmp_path)
    assert lock is not None
    assert json.loads(lock_path(state).read_text())["pid"] == os.getpid()
    lock.release()


def test_a_holder_that_said_nothing_is_described_as_such() -> None:
    assert describe_holder("") == "another process (which did not say which)"
    other = describe_holder(json.dumps({"pid": 7, "host": "node-3", "command": "python job.py",
                                        "since": "2024-01-01T00:00:00+00:00"}))
    assert other == ("process 7 on host node-3, running 'python job.py', "
                     "since 2024-01-01T00:00:00+00:00")


def test_a_lock_released_leaves_no_directory_it_made(tmp_path: Path) -> None:
    state = tmp_path / "new" / "state" / "ivm.duckdb"
    lock = StateLock.acquire(state, tmp_path)
    assert lock is not None and lock_path(state).exists()
    lock.release()  # an open that failed after taking it: nothing left
    assert list(tmp_path.iterdir()) == []
    lock = StateLock.acquire(state, tmp_path)
    assert lock is not None
    state.write_text("the state")  # an open that succeeded: its directory stays
    lock.release()
    assert [p.name for p in state.parent.iterdir()] == ["ivm.duckdb"]
