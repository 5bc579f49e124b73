"""A session's in-memory indexes saved beside its state file, for the next open alone
(with small JSON notes, such as what DuckDB answered when the views were planned).

A session keeps some state in memory only: each base table's ``RowIndex`` (its batch
checks) and operators' memory such as an ASOF join's ``TimeIndex``es. They are built
from the traces at first use, which is O(table): for a job that opens its state, ingests
one batch and closes (the way many pipelines run), every epoch would pay it.

So a clean ``close`` saves them, as numpy arrays, in a *snapshot* directory beside the
state file, stamped with what the state was then (the epoch and the catalog, see
``Catalog.signature``); the next open takes it back if the stamp still holds:

* **Only the very next open.** Taking a snapshot removes its manifest first, so a
  session that then changes the state and does not close cleanly (a crash) leaves no
  snapshot behind to mislead a later one; the indexes are built from the traces again.
* **Only the same state.** A stamp that differs from the state opened discards the
  snapshot: the stamp names the catalog (epoch, tables, views, manifests) and what
  computed the arrays (DuckDB's version, for its ``hash``; ivm's version and formats).
  Like the rest of ivm, it assumes the state changes only through ivm: rows written
  into a trace by another program, without an epoch, would go unseen.
* **At worst absent.** Anything unreadable is dropped, never trusted (an index checks
  its own arrays' format, types and lengths): what is missing is built from the traces,
  as without a snapshot.
* **O(1) to open.** Large arrays are memory-mapped read-only (``mode="r"``) or copy-on-
  write (``mode="c"``: the owner changes them in place after epochs commit); only the
  pages a search touches are read.
* **Unchanged arrays are not written again.** An array still mapped from the previous
  snapshot is hard-linked into the new one, so a close costs what changed since the open
  (an index's levels above its base), not the whole index.

The snapshot is written into a fresh directory and put in place by a rename; the old one
is removed first (its mapped files stay readable until unmapped: POSIX semantics).
"""

from __future__ import annotations

import json
import os
import shutil
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ivm import faults

MANIFEST = "manifest.json"
FORMAT = 3
"""Version of what a snapshot holds: 3 since row hashes tell 128-bit numbers and nested
values apart (``ivm.execution.exact.hash_terms``)."""
MAPPED_BYTES = 1 << 20
"""Arrays of at least this many bytes are memory-mapped when taken back; smaller ones
are read whole."""

Arrays = dict[str, np.ndarray]
"""One saved thing: named arrays (an index's levels, say)."""


@dataclass(frozen=True)
class Snapshot:
    """What a snapshot holds: entries of named arrays, and notes (small JSON values)."""

    entries: dict[str, Arrays] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)


_mapped: dict[int, tuple[weakref.ref[np.ndarray], Path]] = {}
"""Read-only arrays mapped from a snapshot file, by id: linked, not written, when saved
again unchanged."""


def snapshot_dir(state_file: Path) -> Path:
    """Where the snapshot of the state in ``state_file`` lives."""
    return state_file.with_name(state_file.name + ".memory")


def save_snapshot(
    directory: Path, stamp: str, entries: Mapping[str, Mapping[str, np.ndarray]],
    writable: Mapping[str, frozenset[str]] | None = None,
    notes: Mapping[str, Any] | None = None,
) -> None:
    """Save ``entries`` (name: arrays) and ``notes`` (JSON values) as the snapshot in
    ``directory``, stamped ``stamp``. ``writable`` names, per entry, the arrays its owner
    changes in place: they are mapped copy-on-write when taken back. Replaces any earlier
    snapshot."""
    for key in [k for k, (ref, _) in _mapped.items() if ref() is None]:
        del _mapped[key]
    fresh = directory.with_name(f"{directory.name}.new-{os.getpid()}")
    for stale in directory.parent.glob(f"{directory.name}.new-*"):  # left by a crash
        shutil.rmtree(stale, ignore_errors=True)
    try:
        fresh.mkdir(parents=True)
        faults.reached("snapshot.begin")
        listed: dict[str, dict[str, list[object]]] = {}
        count = 0
        for name, arrays in entries.items():
            files: dict[str, list[object]] = {}
            for array_name, array in arrays.items():
                file = f"{count}.npy"
                count += 1
                faults.reached("snapshot.array")
                _write(array, fresh / file)
                mode = "c" if array_name in (writable or {}).get(name, frozenset()) else "r"
                files[array_name] = [file, mode]
            listed[name] = files
        manifest = {"format": FORMAT, "stamp": stamp, "entries": listed,
                    "notes": dict(notes or {})}
        (fresh / MANIFEST).write_text(json.dumps(manifest))
        faults.reached("snapshot.manifest")
        shutil.rmtree(directory, ignore_errors=True)
        fresh.rename(directory)
        faults.reached("snapshot.renamed")
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise


def take_snapshot(directory: Path, stamp: str) -> Snapshot:
    """The snapshot in ``directory`` if it is stamped ``stamp`` (else an empty one), taken:
    it serves no later open. Arrays are mapped where large (module docstring)."""
    manifest_file = directory / MANIFEST
    try:
        manifest = json.loads(manifest_file.read_text())
    except (OSError, ValueError):
        return Snapshot()
    try:
        manifest_file.unlink()  # taken: valid for this open only
    except OSError:
        return Snapshot()
    faults.reached("snapshot.taken")
    entries = manifest.get("entries") if isinstance(manifest, dict) else None
    notes = manifest.get("notes") if isinstance(manifest, dict) else None
    if (not isinstance(entries, dict) or not isinstance(notes, dict)
            or manifest.get("format") != FORMAT or manifest.get("stamp") != stamp):
        shutil.rmtree(directory, ignore_errors=True)
        return Snapshot()
    taken: dict[str, Arrays] = {}
    for name, files in entries.items():
        try:
            taken[name] = {a: _read(directory / file, mode) for a, (file, mode) in files.items()}
        except (OSError, ValueError, TypeError, AttributeError, EOFError):
            continue  # unreadable: rebuilt from the traces instead
    return Snapshot(taken, notes)


def _read(path: Path, mode: str) -> np.ndarray:
    if mode not in ("r", "c"):
        raise ValueError(f"unknown mapping mode {mode!r}")
    if path.stat().st_size < MAPPED_BYTES:
        return np.load(path, allow_pickle=False)
    array = np.load(path, mmap_mode=mode, allow_pickle=False)
    if mode == "r":
        _mapped[id(array)] = (weakref.ref(array), path)
    return array


def _write(array: np.ndarray, path: Path) -> None:
    """Write ``array`` to ``path``, or link the file it is still mapped from unchanged (an
    array is saved once: the session that mapped it closes with this save)."""
    known = _mapped.pop(id(array), None)
    if known is not None and known[0]() is array and known[1].exists():
        try:
            os.link(known[1], path)
            return
        except OSError:
            pass
    np.save(path, np.asarray(array), allow_pickle=False)
