"""A hypothesis strategy of malformed batches: rows with values of the wrong type, missing
and extra columns, NULL keys, keys repeated within the batch or already held, and deletes
of rows that are not there, mixed with good rows, in any batch kind; and the property every
such batch must keep (``applies_exactly_or_changes_nothing``), in either mode."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

import ivm
from bad_input.unchanged import assert_views_recompute

SCHEMA = """
CREATE TABLE t (id BIGINT PRIMARY KEY, g VARCHAR NOT NULL, v INTEGER);
CREATE VIEW by_g AS SELECT g, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY g;
CREATE VIEW self AS SELECT a.id, b.v FROM t a JOIN t b ON a.v = b.id;
"""

COLUMNS = ("id", "g", "v")
"""The table ``t (id BIGINT PRIMARY KEY, g VARCHAR NOT NULL, v INTEGER)``."""

KEYS = st.integers(0, 5)
GOOD_VALUES = {"id": KEYS, "g": st.sampled_from(["a", "b"]), "v": st.integers(-3, 3) | st.none()}
WRONG_VALUES = {
    "id": st.sampled_from([None, "1", 1.5, True, 2**64]),
    "g": st.sampled_from([None, 5, b"\xff", ["a"]]),
    "v": st.sampled_from(["x", 2**40, 1.25, {"a": 1}]),
}


@st.composite
def rows(draw: st.DrawFn) -> dict[str, Any]:
    """One row: good, or with a wrong value, a missing or an extra column, and a weight."""
    row = {c: draw(GOOD_VALUES[c]) for c in COLUMNS}
    fault = draw(st.sampled_from(["none", "none", "value", "missing", "extra"]))
    if fault == "value":
        column = draw(st.sampled_from(COLUMNS))
        row[column] = draw(WRONG_VALUES[column])
    elif fault == "missing":
        del row[draw(st.sampled_from(COLUMNS))]
    elif fault == "extra":
        row["colour"] = "red"
    row["__w"] = draw(st.sampled_from([1, 1, 1, -1, 2]))
    return row


def as_kind(batch: list[dict[str, Any]], kind: str) -> Any:
    """The rows as a list of dicts, a dict of columns or an Arrow table (where they fit one:
    rows of different keys stay a list, which the session must refuse)."""
    if kind == "rows" or not batch or any(r.keys() != batch[0].keys() for r in batch):
        return batch
    columns = {k: [r[k] for r in batch] for k in batch[0]}
    if kind == "columns":
        return columns
    try:
        return pa.table(columns)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        return batch


def malformed_batches() -> st.SearchStrategy[Any]:
    """Batches for ``t``: one to four rows (see ``rows``), as one of the batch kinds."""
    return st.builds(as_kind, st.lists(rows(), min_size=1, max_size=4),
                     st.sampled_from(["rows", "columns", "arrow"]))


def rows_of(batch: Any) -> list[dict[str, Any]]:
    """The rows a batch of any kind holds (a Spark DataFrame's: ``rows_of`` its Arrow)."""
    if isinstance(batch, pa.Table):
        return batch.to_pylist()
    if isinstance(batch, dict):
        return [dict(zip(batch, values, strict=True)) for values in zip(*batch.values(),
                                                                          strict=True)]
    if isinstance(batch, list):
        return batch
    return rows_of(batch.toArrow())


def table_rows(db: Any) -> Counter[tuple[Any, ...]]:
    """The rows ``t`` holds now, with their copies."""
    return Counter(tuple(r[c] for c in COLUMNS) for r in db.read("t").to_pylist())


def applies_exactly_or_changes_nothing(db: Any, batch: Any, capture: Callable[[Any], Any],
                                       assert_unchanged: Callable[[Any, Any], Any]) -> bool:
    """Ingest ``batch`` into ``t``: either it is refused with an ``IvmError`` (never an
    ``InternalError``) and ``assert_unchanged(db, capture(db))`` holds, or ``t`` holds its
    old rows plus the batch's and every view equals DuckDB's recomputation. Returns
    whether it applied."""
    before, held = capture(db), table_rows(db)
    try:
        db.ingest("t", batch)
    except ivm.IvmError as error:
        assert not isinstance(error, ivm.InternalError), error
        assert_unchanged(db, before)
        return False
    expected = held.copy()
    for row in rows_of(batch):
        expected[tuple(row[c] for c in COLUMNS)] += row["__w"]
    assert +expected == expected, "accepted a delete of a row that was not there"
    assert table_rows(db) == +expected
    assert_views_recompute(db)
    return True
