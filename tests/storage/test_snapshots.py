"""Snapshots of in-memory indexes: saved, taken back once, refused when stale, mapped and
linked where large."""

from __future__ import annotations

import numpy as np
import pytest

import ivm.storage.snapshots as snapshots
from ivm.storage.snapshots import Snapshot, save_snapshot, snapshot_dir, take_snapshot


@pytest.fixture
def directory(tmp_path):
    return snapshot_dir(tmp_path / "ivm.duckdb")


def entries(n: int = 10) -> dict[str, dict[str, np.ndarray]]:
    return {
        "a": {"keys": np.arange(n, dtype=np.uint64), "points": np.array([b"x" * 16] * n, "S16")},
        "b": {"counts": np.ones(n, np.int64), "flag": np.array([True])},
    }


def same(taken, expected) -> bool:
    return taken.keys() == expected.keys() and all(
        taken[e].keys() == expected[e].keys()
        and all(np.array_equal(taken[e][a], expected[e][a]) and taken[e][a].dtype ==
                expected[e][a].dtype for a in expected[e])
        for e in expected
    )


def test_a_snapshot_is_taken_back_once(directory):
    assert directory.name == "ivm.duckdb.memory"
    save_snapshot(directory, "epoch 3", entries(), notes={"seen": {"sql": [["a", "INTEGER"]]}})
    taken = take_snapshot(directory, "epoch 3")
    assert same(taken.entries, entries())
    assert taken.notes == {"seen": {"sql": [["a", "INTEGER"]]}}
    assert take_snapshot(directory, "epoch 3") == Snapshot()  # taken: the next open builds


def test_a_stale_snapshot_is_refused_and_removed(directory):
    save_snapshot(directory, "epoch 3", entries())
    assert take_snapshot(directory, "epoch 4") == Snapshot()
    assert not directory.exists()
    assert take_snapshot(directory, "epoch 3") == Snapshot()  # gone for good


def test_no_snapshot_and_an_unreadable_one(directory):
    assert take_snapshot(directory, "x") == Snapshot()
    directory.mkdir(parents=True)
    (directory / snapshots.MANIFEST).write_text("{not json")
    assert take_snapshot(directory, "x") == Snapshot()
    for shape in ('{"format": 2, "stamp": "x", "entries": [], "notes": {}}', "[1]",
                  '{"format": 2, "stamp": "x", "entries": {"a": 1}, "notes": {}}'):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / snapshots.MANIFEST).write_text(shape)
        assert take_snapshot(directory, "x").entries == {}


def test_an_unreadable_entry_is_left_out(directory):
    save_snapshot(directory, "s", entries())
    damaged = next(p for p in sorted(directory.glob("*.npy")) if p.name == "0.npy")
    damaged.write_bytes(b"not an array")
    taken = take_snapshot(directory, "s").entries
    assert set(taken) == {"b"}  # entry "a" (files 0 and 1) is rebuilt by its owner instead


def test_large_arrays_are_mapped_and_linked_when_saved_again_unchanged(directory, monkeypatch):
    monkeypatch.setattr(snapshots, "MAPPED_BYTES", 64)
    first = entries(100)
    save_snapshot(directory, "s1", first, writable={"b": frozenset({"counts"})})
    taken = take_snapshot(directory, "s1").entries
    assert isinstance(taken["a"]["keys"], np.memmap)
    assert not taken["a"]["keys"].flags.writeable  # read-only: "r"
    counts = taken["b"]["counts"]
    counts[0] += 41  # copy-on-write ("c"): changed here, not in the file
    inode = (directory / "0.npy").stat().st_ino
    kept = {"a": taken["a"], "b": {"counts": counts, "flag": taken["b"]["flag"]}}
    save_snapshot(directory, "s2", kept, writable={"b": frozenset({"counts"})})
    assert (directory / "0.npy").stat().st_ino == inode  # unchanged: linked, not written
    again = take_snapshot(directory, "s2").entries
    assert again["b"]["counts"][0] == 42 and again["b"]["counts"][1] == 1
    assert np.array_equal(again["a"]["keys"], np.arange(100, dtype=np.uint64))


def test_saving_replaces_the_last_snapshot(directory):
    save_snapshot(directory, "s1", entries())
    save_snapshot(directory, "s2", {"c": {"x": np.zeros(3)}})
    assert take_snapshot(directory, "s1") == Snapshot()
    save_snapshot(directory, "s2", {"c": {"x": np.zeros(3)}})
    assert set(take_snapshot(directory, "s2").entries) == {"c"}
    assert [p.name for p in directory.parent.iterdir()] == [directory.name]  # no leftovers
