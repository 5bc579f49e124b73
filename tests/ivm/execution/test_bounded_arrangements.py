"""Arrangements within a memory budget (``ivm.execution.bounded_arrangements``): a lookup
without room reads the table and answers exactly what the arrangement would; one that
takes the state past its share drops the arrangement; ``fit`` sheds the largest first."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from ivm.execution.bounded_arrangements import BoundedArrangements
from ivm.operators.base import At
from ivm.storage.memory import MemoryBudget

KEYS = At(("k",), "SELECT * FROM (VALUES (1), (3), (NULL), (99)) AS x(k)")


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    """Trace ``t`` (k, v, weight): rows whose weights sum to positive and to negative
    counts, so that a live read and a read of every weight differ; a NULL key."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT * FROM (VALUES (1::BIGINT, 'a', 2::BIGINT), (1, 'b', -1), "
        "(1, 'a', -1), (3, 'c', 1), (3, 'd', -2), (3, 'e', 1), (3, 'e', -1), (NULL, 'n', 1), "
        "(5, 'f', 1)) AS r(k, v, __w)"
    )
    return con


def budget(limit: str, held: int = 0) -> MemoryBudget:
    made = MemoryBudget(limit)
    made.held = lambda: held
    return made


def rows(found: object) -> list[tuple]:
    table, exact = found  # type: ignore[misc]
    assert exact
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@pytest.mark.parametrize("live", [True, False])
@pytest.mark.parametrize("reads", [None, ("v",)])
def test_a_lookup_without_room_answers_as_the_arrangement_would(
    con: duckdb.DuckDBPyConnection, live: bool, reads: tuple[str, ...] | None
) -> None:
    roomy = BoundedArrangements(con, budget("1GB"))
    tight = BoundedArrangements(con, budget("100B"))
    assert rows(tight.lookup("t", KEYS, live, "v", reads)) == rows(
        roomy.lookup("t", KEYS, live, "v", reads))
    assert roomy.nbytes() > 0 and tight.nbytes() == 0
    assert tight.lookup_hashed("t", ("k",), None, np.zeros(0, np.uint64)) is None  # type: ignore[arg-type]


def appended(arrangements: BoundedArrangements, rows: str) -> None:
    """Rows appended to ``t`` by an epoch that commits (held for its arrangements)."""
    with arrangements.exporting():
        arrangements.append("t", rows)
    arrangements.committed()


def test_growing_past_the_share_drops_the_arrangement(con: duckdb.DuckDBPyConnection) -> None:
    held = [0]
    made = MemoryBudget("1MB")
    made.held = lambda: held[0]
    arrangements = BoundedArrangements(con, made)
    arrangements.lookup("t", KEYS, True)
    appended(arrangements, "SELECT 3::BIGINT, 'g', 1::BIGINT")  # held for the next read
    assert arrangements.nbytes() > 0
    held[0] = 600_000  # past the state's half of 1 MB: merging at this read drops it
    expected = rows(BoundedArrangements(con, MemoryBudget("1GB")).lookup("t", KEYS, True))
    assert (3, "g", 1) in expected  # the row appended
    assert rows(arrangements.lookup("t", KEYS, True)) == expected
    assert arrangements.nbytes() == 0
    assert rows(arrangements.lookup("t", KEYS, True)) == expected  # from the table now
    held[0] = 0  # room again: built again
    arrangements.lookup("t", KEYS, True)
    assert arrangements.nbytes() > 0
    held[0] = 600_000  # rows committed past the share: dropped as they are held
    appended(arrangements, "SELECT 5::BIGINT, 'h', 1::BIGINT")
    assert arrangements.nbytes() == 0


def test_fit_sheds_the_largest_arrangement_first(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE small AS SELECT 1::BIGINT AS k, 1::BIGINT AS __w")
    made = MemoryBudget("1GB")
    arrangements = BoundedArrangements(con, made)
    arrangements.lookup("t", KEYS, True)
    arrangements.lookup("small", At(("k",), "SELECT 1"), True)
    sizes = {s.table: s.bytes for s in arrangements.sizes()}
    assert sizes["t"] > sizes["small"]
    made.held = arrangements.nbytes
    made.limit = 2 * (arrangements.nbytes() - 1)  # over its half by a byte
    arrangements.fit()
    assert [s.table for s in arrangements.sizes()] == ["small"]
