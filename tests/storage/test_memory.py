"""The session's memory budget (``ivm.storage.memory``): how a limit is written, how it is
shared between DuckDB and the in-memory state, and how large a table's rows are."""

from __future__ import annotations

import duckdb
import pytest

from ivm.errors import IvmError, ResourceError
from ivm.storage.memory import (
    DEFAULT_FRACTION,
    DUCKDB_FLOOR,
    STATE_SHARE,
    MemoryBudget,
    default_limit,
    describe,
    estimate_bytes,
    machine_memory,
    parse_limit,
    rows_bytes,
)


@pytest.mark.parametrize(("written", "nbytes"), [
    (4096, 4096),
    ("4GB", 4 * 1000**3),
    ("4 gb", 4 * 1000**3),
    ("512MiB", 512 * 1024**2),
    ("1.5GB", 1_500_000_000),
    ("100000", 100_000),
    ("100000B", 100_000),
    ("8kb", 8000),
])
def test_a_limit_is_bytes_or_duckdbs_spelling(written: object, nbytes: int) -> None:
    assert parse_limit(written) == nbytes


def test_a_percentage_is_of_the_machines_memory() -> None:
    assert parse_limit("50%") == int(machine_memory() * 0.5)


@pytest.mark.parametrize("written", [0, -1, True, 1.5, "", "4 parsecs", "GB", None, [4]])
def test_other_limits_are_refused_in_the_users_terms(written: object) -> None:
    with pytest.raises(IvmError, match="memory_limit"):
        parse_limit(written)


def test_the_default_is_half_the_machine() -> None:
    assert DEFAULT_FRACTION == 0.5
    assert default_limit() == int(machine_memory() * 0.5) > 0
    budget = MemoryBudget()
    assert budget.limit == default_limit() and not budget.explicit
    assert "the default" in budget.text()


def test_describe_uses_the_units_limits_are_written_in() -> None:
    assert describe(16_000_000) == "16.0 MB"
    assert describe(4 * 1000**3) == "4.0 GB"
    assert describe(512) == "512 bytes"


def test_duckdb_gets_what_the_state_leaves_but_never_less_than_its_floor() -> None:
    budget = MemoryBudget("100MB")
    assert budget.duckdb_share(0) == 100_000_000
    assert budget.duckdb_share(30_000_000) == 70_000_000
    assert budget.duckdb_share(95_000_000) == int(100_000_000 * DUCKDB_FLOOR)


def test_the_state_may_grow_within_its_share() -> None:
    budget = MemoryBudget("100MB")
    held = [0]
    budget.held = lambda: held[0]
    assert budget.admits(int(100_000_000 * STATE_SHARE))
    assert not budget.admits(int(100_000_000 * STATE_SHARE) + 1)
    held[0] = 60_000_000
    assert budget.over() and not budget.admits(0)


def test_require_raises_a_resource_error_saying_what_and_how_much() -> None:
    budget = MemoryBudget("10MB")
    budget.held = lambda: 2_000_000
    budget.require(8_000_000, "table 't': the batch")  # exactly fits
    with pytest.raises(ResourceError) as raised:
        budget.require(8_000_001, "table 't': the batch")
    text = str(raised.value)
    assert "table 't': the batch needs about 8.0 MB" in text
    assert "memory limit of 10.0 MB" in text and "2.0 MB of it held" in text


def test_settle_gives_duckdb_its_share_only_when_it_moved() -> None:
    con = duckdb.connect()
    budget = MemoryBudget("64MiB")
    held = [0]
    budget.held = lambda: held[0]
    budget.configure(con, "/tmp/ivm-test-spill-never-used")
    limit = lambda: con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]  # noqa: E731
    assert limit() == "64.0 MiB"
    assert con.sql("SELECT current_setting('temp_directory')").fetchall()[0][0].endswith(
        "ivm-test-spill-never-used")
    held[0] = 1024  # far less than 1/32 of the limit: not given again
    budget.settle(con)
    assert limit() == "64.0 MiB"
    held[0] = 32 * 1024**2
    budget.settle(con)
    assert limit() == "32.0 MiB"


def test_estimate_counts_fixed_columns_and_measures_strings() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS a, range::INTEGER AS b, "
                "repeat('x', 10) AS s FROM range(1000)")
    columns = [("a", "BIGINT"), ("b", "INTEGER"), ("s", "VARCHAR")]
    # 8 + 4 bytes, 10 characters and an 8-byte offset, and 24 bytes a row asked for
    assert estimate_bytes(con, "t", columns, per_row=24) == 1000 * (8 + 4 + 10 + 8 + 24)
    assert rows_bytes(1000, columns) == 1000 * (8 + 4 + 8)
