"""The lock a session holds on its state directory: one process at a time, and who it is.

DuckDB lets one process open a database file read-write, and its refusal names only a
process id, found after DuckDB has begun opening the file. ivm takes a lock of its own
first, an exclusive ``flock`` on ``<state file>.lock``, and writes the holder into it
(process id, host, command line, since when, as JSON), so a second process (on this
host, or on another one sharing the directory) is refused at once with a ``StateError``
that names the holder. The kernel releases the lock when the holder exits, however it
exits, so a killed session never leaves the state locked; a clean release removes the
file, and the directories acquiring made if they are empty (a failed open leaves the
filesystem as it found it).

A process that opened the file just before its holder removed it could lock the removed
file: ``acquire`` checks that the file it locked is still the one at the path, and tries
again if not. Where ``fcntl`` does not exist (Windows) there is no lock file, and
DuckDB's own lock is the only one.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import sys
from pathlib import Path

from ivm.errors import StateError

try:
    import fcntl
except ImportError:  # pragma: no cover - not a POSIX system
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".lock"
"""What the lock file adds to the state file's name."""


def lock_path(state_file: Path) -> Path:
    """The lock file of ``state_file``."""
    return state_file.with_name(state_file.name + SUFFIX)


def holder_record() -> dict[str, object]:
    """What this process writes into a lock it holds."""
    command = " ".join([os.path.basename(sys.executable), *sys.argv])
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": command[:300],
        "since": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def describe_holder(text: str) -> str:
    """The holder a lock file names, for a message (or that it named none)."""
    try:
        record = json.loads(text)
        pid, host = int(record["pid"]), str(record["host"])
    except (ValueError, KeyError, TypeError):
        return "another process (which did not say which)"
    where = "this host" if host == socket.gethostname() else f"host {host}"
    command = f", running {record['command']!r}" if record.get("command") else ""
    since = f", since {record['since']}" if record.get("since") else ""
    return f"process {pid} on {where}{command}{since}"


class StateLock:
    """A held lock on one state file (``acquire``; ``release`` when the session closes)."""

    def __init__(self, path: Path, descriptor: int, made: list[Path]) -> None:
        self.path = path
        self._descriptor: int | None = descriptor
        self._made = made  # directories acquiring made, the deepest first

    @classmethod
    def acquire(cls, state_file: Path, where: object) -> StateLock | None:
        """Lock ``state_file`` for this process; StateError naming the holder if another
        holds it (``where``: the state as the user named it). None without ``fcntl``."""
        if fcntl is None:  # pragma: no cover
            return None
        path = lock_path(state_file)
        made = [d for d in [path.parent, *path.parent.parents] if not d.exists()]
        while True:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as error:
                raise StateError(f"cannot lock the state at {where}: {error}") from error
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                text = _read(descriptor)
                os.close(descriptor)
                _remove_empty(made)
                raise StateError(
                    f"state at {where} is in use by {describe_holder(text)}: one process at "
                    "a time may hold it; close that session first (or read its views "
                    "through the holder's db.serve())"
                ) from None
            if _same_file(descriptor, path):
                break
            os.close(descriptor)  # its holder removed it as we opened it: again
        lock = cls(path, descriptor, made)
        lock._write(json.dumps(holder_record()))
        return lock

    def release(self) -> None:
        """Remove the lock file and let another process take the state (twice: nothing)."""
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()  # still held: nobody has it open and locked
        os.close(descriptor)
        _remove_empty(self._made)  # a refused open leaves no directory it made

    def _write(self, text: str) -> None:
        assert self._descriptor is not None
        os.ftruncate(self._descriptor, 0)
        os.pwrite(self._descriptor, text.encode(), 0)


def _remove_empty(directories: list[Path]) -> None:
    """Remove each of ``directories`` (the deepest first) that is empty."""
    for directory in directories:
        try:
            directory.rmdir()
        except OSError:
            return  # not empty (the state is there), or not ours to remove


def _read(descriptor: int) -> str:
    try:
        return os.pread(descriptor, 4096, 0).decode(errors="replace")
    except OSError:
        return ""


def _same_file(descriptor: int, path: Path) -> bool:
    """Whether the open file ``descriptor`` is still the file at ``path``."""
    try:
        here = os.stat(path)
    except OSError:
        return False
    there = os.fstat(descriptor)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


__all__ = ["SUFFIX", "StateLock", "describe_holder", "lock_path"]
