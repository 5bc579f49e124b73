"""Malformed batches, generated (``bad_input.malformed``), in Spark mode: each is accepted,
and then the table holds exactly what it held plus the batch's rows and every view equals
DuckDB's recomputation, or rejected with an ``IvmError`` (never an ``InternalError``) and
nothing changed, on disk too: every partition file and its stored epoch
(``spark_state.py``). Batches whose columns make an Arrow table may go as a Spark
DataFrame (values then checked on the executors).

One Spark-mode session serves every example (its DDL costs seconds): a batch meets the rows
every earlier one left, which the property allows for. ``make test`` draws few sequences,
each a Spark epoch per accepted batch; the deep profile many more.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from oracle.settings import DEEP
from oracle.spark import SPARK_PARTITIONS

import ivm
from bad_input.malformed import SCHEMA, applies_exactly_or_changes_nothing, malformed_batches
from bad_input.spark_state import assert_spark_unchanged, capture_spark

pytestmark = pytest.mark.xdist_group("bad_input_malformed_spark")
"""Under xdist, one worker runs the module: its module-scoped session is made once."""

PROFILE = settings(max_examples=30 if DEEP else 2, deadline=None, derandomize=True,
                   database=None, phases=(Phase.generate,),
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def db(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with ivm.connect(tmp_path_factory.mktemp("malformed") / "state", spark=spark,
                     partitions=SPARK_PARTITIONS) as session:
        session.execute(SCHEMA)
        yield session


def spark_frame(spark: Any, table: pa.Table) -> Any:
    """``table`` as a Spark DataFrame, if Spark takes its types (else the table itself)."""
    try:
        return spark.createDataFrame(table)
    except Exception:  # noqa: BLE001 - a type Spark has no DataFrame for (an all-NULL column)
        return table


OUTCOMES: list[bool] = []
"""Whether each batch applied, over every example (so the test can tell both happened)."""


@PROFILE
@given(st.lists(st.tuples(malformed_batches(), st.booleans()), min_size=2, max_size=3))
def test_a_malformed_batch_applies_exactly_or_changes_nothing_on_spark(
    db: Any, batches: list[tuple[Any, bool]]
) -> None:
    for batch, as_frame in batches:
        if as_frame and isinstance(batch, pa.Table):
            batch = spark_frame(db.spark, batch)
        OUTCOMES.append(applies_exactly_or_changes_nothing(db, batch, capture_spark,
                                                           assert_spark_unchanged))


def test_the_examples_applied_some_batches_and_refused_others() -> None:
    if not OUTCOMES:
        pytest.skip("runs after the property test, over its examples")
    assert True in OUTCOMES and False in OUTCOMES, OUTCOMES
