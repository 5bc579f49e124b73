"""Where a session's state lives: claiming and opening its DuckDB file.

``ivm.connect(path)`` keeps everything in ``path/ivm.duckdb`` (or in ``path``
itself when it names a ``.duckdb`` file), and beside it, after a clean close, the
in-memory indexes saved for the next open (``<state file>.memory/``, see
``ivm.storage.snapshots``). One process may hold a DuckDB file
read-write, and DuckDB would silently share one file between two connections
of the same process, so a second session of the same state is refused.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ivm.errors import StateError

STATE_FILE = "ivm.duckdb"

_OPEN_STATES: set[Path] = set()
"""State files held by a live session of this process."""


def claim(path: Path | None) -> Path | None:
    """The state file for ``path``, refused if another session of this process holds it."""
    if path is None:
        return None
    file = (path if path.suffix == ".duckdb" else path / STATE_FILE).resolve()
    if file in _OPEN_STATES:
        raise StateError(f"state at {path} is already open in this process: close it first")
    _OPEN_STATES.add(file)
    return file


def release(file: Path | None) -> None:
    """Let another session open ``file`` again."""
    if file is not None:
        _OPEN_STATES.discard(file)


def open_state(file: Path | None) -> duckdb.DuckDBPyConnection:
    """A connection to the state file (in memory when ``file`` is None)."""
    if file is None:
        return duckdb.connect()
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        return duckdb.connect(str(file))
    except (OSError, duckdb.Error) as error:
        raise StateError(f"cannot open state at {file}: {error}") from error
