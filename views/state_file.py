"""Where a session's state lives: claiming and opening its DuckDB file.

``ivm.connect(path)`` keeps everything in ``path/ivm.duckdb`` (or in ``path``
itself when it names a ``.duckdb`` file), and beside it, after a clean close, the
in-memory indexes saved for the next open (``<state file>.memory/``, see
``ivm.storage.snapshots``). One process may hold a DuckDB file
read-write, and DuckDB would silently share one file between two connections
of the same process, so a second session of the same state is refused: in this
process by the set of states held, and in another (on any host sharing the
directory) by the lock file ``<state file>.lock`` (``ivm.storage.state_lock``),
taken before DuckDB opens anything, whose refusal names the holder.

A state file that closes with a quarter or more of it free blocks (DuckDB reuses them but
never gives them back) is rewritten as it closes (``close_state``,
``ivm.storage.file_rewrite``); a copy a crash left half made is removed at the next open.

The DuckDB settings a view's SQL evaluates under are kept with the state and
given to the session's connection when it opens (``settle_settings``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import duckdb

from ivm import faults
from ivm.errors import IvmError, StateError
from ivm.storage.catalog import Catalog
from ivm.storage.file_rewrite import copy_if_sparse, install_copy, remove_leftover_copy
from ivm.storage.memory import MemoryBudget, spill_directory
from ivm.storage.settings import SettingsError, applied, apply, canonical, current
from ivm.storage.state_lock import StateLock

STATE_FILE = "ivm.duckdb"

_OPEN_STATES: dict[Path, StateLock | None] = {}
"""State files held by a live session of this process, with the lock each holds."""


def claim(path: Path | None) -> Path | None:
    """The state file for ``path``, refused (StateError) if another session of this
    process holds it, or another process does (naming it: ``ivm.storage.state_lock``)."""
    if path is None:
        return None
    file = (path if path.suffix == ".duckdb" else path / STATE_FILE).resolve()
    if path.suffix != ".duckdb" and not file.exists():
        refuse_foreign(file.parent)
    if file in _OPEN_STATES:
        raise StateError(f"state at {path} is already open in this process: close it first")
    _OPEN_STATES[file] = StateLock.acquire(file, path)
    return file


LAYOUT = ("tables", "views", "fence", f"{STATE_FILE}.memory")
"""What ivm writes beside its state file (Spark mode's partition files, the saved indexes)."""


def refuse_foreign(directory: Path) -> None:
    """StateError, touching nothing, if ``directory`` holds what ivm writes beside a state
    file but no state file: another tool's files (or state whose catalog was deleted),
    which new state there would mix with, and Spark mode would remove as strays."""
    found = [name for name in LAYOUT if (directory / name).exists()]
    if found:
        raise StateError(
            f"{directory} holds {', '.join(found)} but no {STATE_FILE}: not ivm state (or "
            "state whose catalog is gone); point ivm.connect at a new directory"
        )


def release(file: Path | None) -> None:
    """Let another session, of this process or another, open ``file`` again."""
    if file is not None and file in _OPEN_STATES:
        lock = _OPEN_STATES.pop(file)
        if lock is not None:
            lock.release()


def open_state(file: Path | None, budget: MemoryBudget) -> duckdb.DuckDBPyConnection:
    """A connection to the state file (in memory when ``file`` is None), given its share
    of ``budget`` and a directory to spill to: beside the file, ``<file>.tmp`` (DuckDB's
    own default), or, in memory, one of its own in the system's temporary directory."""
    if file is None:
        connection = duckdb.connect()
        budget.configure(connection, spill_directory())
        return connection
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        remove_leftover_copy(file)  # a rewrite a crash cut short (ivm.storage.file_rewrite)
        connection = duckdb.connect(str(file))
        budget.configure(connection, f"{file}.tmp")
    except (OSError, duckdb.Error) as error:
        raise StateError(f"cannot open state at {file}: {error}") from error
    faults.reached("open.connected")
    return connection


def close_state(con: duckdb.DuckDBPyConnection, file: Path | None) -> None:
    """Close the state's connection; a state file (``file``: None when in memory, or when
    the session never finished opening) whose free blocks have grown is rewritten first
    (``ivm.storage.file_rewrite``: copied while open, the copy renamed over it once closed)."""
    copy = None
    try:
        if file is not None:
            copy = copy_if_sparse(con, file)
    finally:
        con.close()
    if copy is not None and file is not None:
        install_copy(copy, file)


def settle_settings(
    con: duckdb.DuckDBPyConnection,
    catalog: Catalog,
    requested: Mapping[str, object] | None,
    where: object,
) -> Mapping[str, str]:
    """Give ``con`` the DuckDB settings the state evaluates under (``ivm.storage.settings``)
    and return them (read-only: ``Session.settings``).

    State that records them gets its recorded values, whatever this process's ``TZ``;
    a ``requested`` value other than the recorded one is a StateError. New state, and
    state of a version that recorded none (or fewer), records this connection's values,
    ``requested`` ones over them.
    """
    if requested is not None and not isinstance(requested, Mapping):
        raise IvmError(f"settings= takes a dict of setting names to values, not {requested!r}")
    try:
        chosen = applied(con, canonical(requested or {}))  # as DuckDB spells each value
    except SettingsError as error:
        raise IvmError(f"settings=: {error}") from None
    recorded = catalog.settings() or {}
    conflicts = [f"{n}={recorded[n]!r}" for n, v in chosen.items() if recorded.get(n, v) != v]
    if conflicts:
        raise StateError(
            f"state at {where} evaluates its views under {', '.join(conflicts)}, fixed when it "
            "was created: open it without settings= (its recorded settings apply), or create "
            "new state to use other ones"
        )
    own = current(con)
    settings = {n: v for n, v in recorded.items() if n in own}  # this DuckDB's settings only
    apply(con, settings)
    missing = {n: v for n, v in own.items() if n not in recorded}
    if missing:
        settings.update(missing)
        catalog.record_settings({**recorded, **missing})
    return MappingProxyType(settings)
