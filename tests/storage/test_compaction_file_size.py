"""Compacting traces one after another reuses the blocks each frees (found by the soak,
``benchmarks/bench_soak.py``: after 1,000 epochs 40 of the state file's 123 blocks were
free). Compaction rewrites a trace; until a checkpoint the file holds both its old and its
new rows, and a DuckDB file never shrinks. Left to DuckDB's own checkpoint, every trace
compacted before it holds both at once, so the file grows by all of their compacted sizes;
a checkpoint after each compaction (``traces.release_blocks``) frees the old rows' blocks
before the next trace is rewritten, and the file grows by about one."""

from __future__ import annotations

from pathlib import Path

import duckdb

from ivm.storage.traces import Compactor, create_trace

TRACES = 4
LIVE = 64_000
"""Rows of each trace: 1 MB of random BIGINTs, four of DuckDB's 256 kB blocks."""
RANDOM = "CAST(hash(range + {}) >> 1 AS BIGINT)"


def blocks(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """The file's blocks, and how many of them hold something."""
    total, free = con.execute(
        "SELECT total_blocks, free_blocks FROM pragma_database_size()"
    ).fetchall()[0]
    return total, total - free


def test_traces_compacted_in_one_epoch_grow_the_file_by_about_one_trace(
    tmp_path: Path,
) -> None:
    con = duckdb.connect(str(tmp_path / "state.duckdb"))
    compactor = Compactor()
    names = [f"trace_{i}" for i in range(TRACES)]
    for name in names:
        create_trace(con, name, [("k", "BIGINT"), ("v", "BIGINT")])
        compactor.created(name)
        con.execute(
            f"INSERT INTO {name} SELECT {RANDOM.format(0)}, {RANDOM.format(LIVE)}, 1 "
            f"FROM range({LIVE})"
        ).fetchall()
        compactor.appended(name, LIVE, consolidated=True)
        # a quarter of the rows updated: their retractions, then their new versions
        con.execute(
            f"INSERT INTO {name} SELECT {RANDOM.format(0)}, {RANDOM.format(LIVE)}, -1 "
            f"FROM range({LIVE // 4})"
        ).fetchall()
        con.execute(
            f"INSERT INTO {name} SELECT {RANDOM.format(0)}, {RANDOM.format(2 * LIVE)}, 1 "
            f"FROM range({LIVE // 4})"
        ).fetchall()
        compactor.appended(name, LIVE // 2, retracted=LIVE // 4)
    con.execute("CHECKPOINT").fetchall()  # the tails on disk, as DuckDB's checkpoints put them
    _, used = blocks(con)
    per_trace = used // TRACES * 2 // 3  # a trace's live rows: two thirds of what it holds
    compactor.compact_due(con, {name: ("k",) for name in names})
    con.execute("CHECKPOINT").fetchall()
    total, _ = blocks(con)
    assert all(compactor.sizes[n].base == LIVE for n in names)
    # checkpointed one by one: one trace's new rows beside the rest (about 4 blocks), not
    # all four traces' (about 16)
    assert total - used <= 2 * per_trace, (total, used, per_trace)
    con.close()
