"""A sample of the bad-input corpus in Spark mode (the ``spark`` fixture): the same cases
raise the same error classes with the same words, and change nothing (every table and
view and the epoch); a good batch applies after them, every view then equal to DuckDB's
recomputation. One session serves the sample (its DDL and first epoch cost seconds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from oracle.spark import SPARK_PARTITIONS

import ivm
from bad_input import batch_cases, ddl_cases
from bad_input.cases import SHOP_ROWS, order
from bad_input.runner import rejects_and_keeps
from bad_input.unchanged import assert_views_recompute

pytestmark = pytest.mark.xdist_group("bad_input_corpus_spark")
"""Under xdist, one worker runs the module: its module-scoped fixtures are made once."""

SCHEMA = """
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR NOT NULL, amount DECIMAL(12, 2),
                     qty INTEGER, tags VARCHAR[], day DATE);
CREATE TABLE events (k INTEGER, v DOUBLE, s VARCHAR);
CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total, COUNT(*) AS n FROM orders
    GROUP BY customer;
CREATE VIEW coded AS SELECT k, CAST(s AS INTEGER) AS code FROM events;
"""
"""The shop's orders and events, with a view over each (one fails on a bad value)."""

SAMPLE = {
    "arrow-string-into-int", "null-key-rows", "null-not-null-column", "duplicate-of-held-row",
    "debezium-key-only-delete-absent", "megabyte-string-fails-view-cast", "rows-without-columns",
    "weights-summing-past-int64", "upsert-without-key", "reserved-column-name",
}
"""Ten cases: most refused on the driver; two (a key held in a partition, a view failing on
a value) only by an epoch's Spark job, whose partitions must roll back."""
CASES = [c for c in [*batch_cases.CASES, *ddl_cases.CASES] if c.id in SAMPLE]


@pytest.fixture(scope="module")
def db(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    session = ivm.connect(tmp_path_factory.mktemp("spark") / "state", spark=spark,
                          partitions=SPARK_PARTITIONS)
    session.execute(SCHEMA)
    session.ingest({"orders": SHOP_ROWS["orders"], "events": SHOP_ROWS["events"]})
    yield session
    session.close()


def test_the_sample_is_in_the_corpus() -> None:
    assert {c.id for c in CASES} == SAMPLE


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_on_spark(db: Any, case: Any) -> None:
    rejects_and_keeps(db, case)


def test_a_good_batch_applies_after_the_sample(db: Any, tmp_path: Path) -> None:
    epoch = db.epoch
    db.ingest({"orders": [order(500, customer="cy")], "events": [{"k": 5, "v": 0.5,
                                                                  "s": "12"}]})
    assert db.epoch == epoch + 1
    assert_views_recompute(db)
