"""What a cleanly closed state directory may hold, file by file: the fault tests' check
that no temporary or stray file is left behind (``assert_clean``).

ivm writes, under ``ivm.connect(path)``'s ``path`` (``views.state_file``,
``ivm.storage.partitions``, ``ivm.storage.snapshots``):

* ``ivm.duckdb``, the catalog, epoch and (embedded) every trace; while a session is
  open also ``ivm.duckdb.wal`` (DuckDB's log), ``ivm.duckdb.tmp/`` (where DuckDB spills)
  and ``ivm.duckdb.lock`` (``ivm.storage.state_lock``), and while a close rewrites a
  sparse file ``ivm.duckdb.rewrite`` (``ivm.storage.file_rewrite``), none of which a clean
  close leaves;
* embedded, after a clean close: ``ivm.duckdb.memory/`` (the saved indexes: a
  ``manifest.json`` and numbered ``.npy`` arrays), written as ``ivm.duckdb.memory.new-<pid>/``
  and renamed into place;
* Spark mode: ``fence`` (staged as ``fence.next``), the partition files
  ``tables/t<n>-<table>/table/part-<k>.duckdb`` and ``views/v<n>-<view>/<stage>/part-<k>.duckdb``
  (each with its ``.wal`` while a task or reader holds it), and ``spool/<token>/`` (a
  streamed batch, while its ingest runs).

Everything else, and everything of the second kind, is a leftover: a file or directory
that this whitelist does not name is reported, so a new kind of temporary file shows up
as a failure rather than slipping past a list of known suffixes.
"""

from __future__ import annotations

import re
import urllib.parse
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import duckdb

from ivm.storage.partitions import PartitionLog

STATE_FILE = "ivm.duckdb"
SNAPSHOT_FILE = re.compile(r"(manifest\.json|\d+\.npy)")
RELATION_DIR = {"tables": re.compile(r"t\d+-(.+)"), "views": re.compile(r"v\d+-(.+)")}
STAGE_DIR = re.compile(r"[a-z_]+-[0-9a-f]{12}")
PARTITION_FILE = re.compile(r"part-\d{5}\.duckdb")


def unexpected_files(state: Path, relations: Iterable[str] | None = None) -> list[str]:
    """Each path under ``state`` (relative, with why) that a cleanly closed state does not
    hold (module docstring). ``relations``: the tables and views its catalog holds, when
    known: a directory of another name, or a second one of the same name, is a stray."""
    found: list[str] = []

    def odd(path: Path, why: str) -> None:
        found.append(f"{path.relative_to(state)} ({why})")

    for entry in sorted(state.iterdir()):
        name = entry.name
        if name in (STATE_FILE, "fence") and entry.is_file():
            continue
        if name == f"{STATE_FILE}.memory" and entry.is_dir():
            for file in sorted(entry.iterdir()):
                if not (file.is_file() and SNAPSHOT_FILE.fullmatch(file.name)):
                    odd(file, "not a saved index")
        elif name == "spool" and entry.is_dir():
            for left in sorted(entry.iterdir()):
                odd(left, "a spooled batch no ingest removed")
        elif name in RELATION_DIR and entry.is_dir():
            found.extend(_relation_files(state, entry, RELATION_DIR[name], relations))
        else:
            odd(entry, "not part of a closed state")
    return found


def _relation_files(
    state: Path, folder: Path, pattern: re.Pattern[str], relations: Iterable[str] | None
) -> list[str]:
    """What is out of place in ``tables/`` or ``views/``."""
    found: list[str] = []
    names: Counter[str] = Counter()
    known = set(relations) if relations is not None else None
    for directory in sorted(folder.iterdir()):
        where = directory.relative_to(state)
        match = pattern.fullmatch(directory.name)
        if not (match and directory.is_dir()):
            found.append(f"{where} (not a table's or view's directory)")
            continue
        name = urllib.parse.unquote(match[1])
        names[name] += 1
        if known is not None and name not in known:
            found.append(f"{where} (a stray: {name!r} is no table or view of the catalog)")
        if names[name] > 1:
            found.append(f"{where} (a stray: a second directory of {name!r})")
        for stage in sorted(directory.iterdir()):
            table_stage = folder.name == "tables" and stage.name == "table"
            if not (stage.is_dir() and (table_stage or STAGE_DIR.fullmatch(stage.name))):
                found.append(f"{stage.relative_to(state)} (not a stage's directory)")
                continue
            found.extend(
                f"{file.relative_to(state)} (not a partition file)"
                for file in sorted(stage.iterdir())
                if not (file.is_file() and PARTITION_FILE.fullmatch(file.name))
            )
    return found


def assert_clean(state: Path, relations: Iterable[str] | None = None) -> None:
    """AssertionError listing what ``unexpected_files`` finds under ``state``."""
    left = unexpected_files(state, relations)
    assert not left, f"left in the closed state at {state}: {left}"


def partition_epochs(root: Path) -> Counter[int]:
    """How many partition files under ``root`` stand at each epoch (read-only: as a dead
    driver or a failed ingest left them)."""
    epochs: Counter[int] = Counter()
    for file in root.glob("**/part-*.duckdb"):
        con = duckdb.connect(str(file), read_only=True)
        try:
            epochs[PartitionLog(con).epoch] += 1
        finally:
            con.close()
    return epochs
