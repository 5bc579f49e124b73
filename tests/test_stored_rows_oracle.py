"""Random CDC over values DuckDB calls equal but views tell apart (issue #22, defect 4).

A keyed and an unkeyed table hold ``-0.0`` and ``0.0``, NaNs of several signs and
payloads, and TIMESTAMPTZ instants near midnight. Deletes (and the before images of
updates) often send a value equal to the stored one but not identical to it: ``-0.0``
for ``0.0``, another NaN, the same instant in another time zone. Views expose the
difference (``CAST(d AS VARCHAR)``, ``1/d``, ``signbit(d)``) and evaluate the
instants in the state's time zone (``CAST(ts AS DATE)``, ``hour(ts)``,
``date_trunc``); the session is closed and reopened under another ``TZ`` every few
epochs. After every epoch the harness checks views, deltas and tables against DuckDB.

The oracle here applies each change as ivm documents it (``ivm.execution.constraints``):
a change is consolidated with values DuckDB calls equal kept apart, and a delete takes
the copies (stored, or inserted by the same batch) identical to the value it sends
first, then equal ones. So that the
second step never has a choice to make (which of two equal stored values goes), a
delete is sent as another value only where every stored copy equal to it is identical
(always, with a key); and a batch holding two values of one class goes as a list of
rows, not in the weighted format (whose renderer sums rows Python calls equal).
"""

from __future__ import annotations

import datetime
import itertools
import math
import os
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle.harness import MODES, NAN, Epoch, Harness, Row, TableSpec, op_events, quote
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm


def nan_with(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


NEGATIVE_NAN = nan_with(0xFFF8000000000000)
PAYLOAD_NAN = nan_with(0x7FF8000000000123)
NANS = (NAN, NEGATIVE_NAN, PAYLOAD_NAN)
UTC = datetime.UTC
INSTANTS = (
    datetime.datetime(2024, 1, 2, 3, 0, tzinfo=UTC),    # Jan 1 in Los Angeles
    datetime.datetime(2024, 1, 1, 23, 30, tzinfo=UTC),  # Jan 2 in Tokyo
    datetime.datetime(2024, 3, 10, 10, 0, tzinfo=UTC),  # the DST change in Los Angeles
)
ZONES = (datetime.timezone(datetime.timedelta(hours=-8)), datetime.timezone(
    datetime.timedelta(hours=5, minutes=30)))

KEYED = "CREATE TABLE kt (k INTEGER PRIMARY KEY, d DOUBLE, ts TIMESTAMPTZ)"
UNKEYED = "CREATE TABLE ut (g INTEGER, d DOUBLE, ts TIMESTAMPTZ)"
DOMAINS: dict[str, tuple[Any, ...]] = {
    "kt.k": tuple(range(6)),
    "kt.d": (0.0, -0.0, *NANS, 1.5, -2.0),
    "kt.ts": INSTANTS,
    "ut.g": (1, 2),
    "ut.d": (0.0, -0.0, NAN, 1.5),  # one NaN: an unkeyed class then holds one NaN value
    "ut.ts": INSTANTS[:2],
}
# CAST(-NaN AS VARCHAR) is grouped wrongly by DuckDB 2.0.1 ('-na\x00'): kt's views,
# whose NaNs have both signs, show the sign by signbit instead.
VIEWS = {
    "k_values": "SELECT k, d, 1/d AS r, signbit(d) AS neg FROM kt",
    "k_signs": "SELECT signbit(d) AS neg, isnan(d) AS nan, COUNT(*) AS n FROM kt GROUP BY ALL",
    "k_days": "SELECT k, CAST(ts AS DATE) AS day, hour(ts) AS h FROM kt",
    "k_per_day": "SELECT CAST(ts AS DATE) AS day, COUNT(*) AS n, "
                 "SUM(CASE WHEN signbit(d) THEN 1 ELSE 0 END) AS negative FROM kt "
                 "GROUP BY CAST(ts AS DATE)",
    "u_values": "SELECT g, CAST(d AS VARCHAR) AS s, 1/d AS r, date_trunc('day', ts) AS day "
                "FROM ut",
    "u_groups": "SELECT CAST(d AS VARCHAR) AS s, hour(ts) AS h, COUNT(*) AS n FROM ut "
                "GROUP BY ALL",
}


def exact(value: Any) -> Any:
    """A key telling apart values DuckDB calls equal (floats by their bits)."""
    return ("float", struct.pack("<d", value)) if isinstance(value, float) else value


def equal(value: Any) -> Any:
    """A key equal for values DuckDB calls equal."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else value + 0.0
    return value


def twin_of(value: Any, pick: int) -> Any:
    """A value DuckDB calls equal to ``value``, other bits where there are any."""
    if isinstance(value, float) and math.isnan(value):
        others = [n for n in NANS if exact(n) != exact(value)]
        return others[pick % len(others)]
    if isinstance(value, float) and value == 0:
        return -value
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(ZONES[pick % len(ZONES)])
    return value


class StoredRowsHarness(Harness):
    """The harness with deletes sent as equal values, and an oracle that applies them as
    ivm documents (see the module docstring)."""

    def strategy(self, max_ops: int = 6, modes: Sequence[str] = MODES
                 ) -> st.SearchStrategy[Epoch]:
        return _twinned(super().strategy(max_ops, modes), self)

    def single_valued(self, spec: TableSpec, row: Row) -> bool:
        """Whether every stored copy of ``spec``'s rows equal to ``row`` is identical."""
        if spec.primary_key:
            return True
        terms = [f"{quote(c.name)}::BIT" if c.type == "DOUBLE" else quote(c.name)
                 for c in spec.columns]
        match = " AND ".join(f"{quote(n)} IS NOT DISTINCT FROM ?" for n in spec.names)
        found = self.oracle.execute(
            f"SELECT count(*) FROM (SELECT DISTINCT {', '.join(terms)} "
            f"FROM {quote(spec.name)} WHERE {match})", list(row)).fetchall()
        return found[0][0] <= 1

    def _apply_to_oracle(self, change: Any) -> None:
        spec = self.specs[change.table]
        net: dict[Row, list[Any]] = {}
        for row, weight in op_events(change.ops):
            net.setdefault(tuple(exact(v) for v in row), [row, 0])[1] += weight
        # Inserts first: a delete may take a row the same batch inserts.
        inserts = [row for row, weight in net.values() for _ in range(max(weight, 0))]
        if inserts:
            data = pa.Table.from_pylist([dict(zip(spec.names, r, strict=True)) for r in inserts],
                                        schema=self.schemas[change.table])
            self.oracle.register("__inserts", data)
            try:
                self.oracle.execute(
                    f"INSERT INTO {quote(spec.name)} SELECT * FROM __inserts").fetchall()
            finally:
                self.oracle.unregister("__inserts")
        left = []
        for row, weight in net.values():
            if weight < 0:
                taken = self._delete(spec, row, -weight, identical=True)
                left.append((row, -weight - taken))
        for row, count in left:
            if count:
                taken = self._delete(spec, row, count, identical=False)
                assert taken == count, f"harness bug: {row!r} deleted {taken} of {count}"

    def _delete(self, spec: TableSpec, row: Row, count: int, identical: bool) -> int:
        """Delete up to ``count`` copies of ``row`` (by rowid) from the oracle: identical
        ones, or any DuckDB calls equal; returns how many."""
        data = pa.Table.from_pylist([dict(zip(spec.names, row, strict=True))],
                                    schema=self.schemas[spec.name])
        parts = []
        for c in spec.columns:
            x, d = f"x.{quote(c.name)}", f"d.{quote(c.name)}"
            parts.append(f"{x} IS NOT DISTINCT FROM {d}")
            if identical and c.type == "DOUBLE":
                parts.append(f"{x}::BIT IS NOT DISTINCT FROM {d}::BIT")
        self.oracle.register("__delete", data)
        try:
            return self.oracle.execute(
                f"DELETE FROM {quote(spec.name)} WHERE rowid IN (SELECT x.rowid FROM "
                f"{quote(spec.name)} AS x, __delete AS d WHERE {' AND '.join(parts)} "
                f"ORDER BY x.rowid LIMIT {count})").fetchall()[0][0]
        finally:
            self.oracle.unregister("__delete")


@st.composite
def _twinned(draw: Any, epochs: st.SearchStrategy[Epoch], harness: StoredRowsHarness
             ) -> Epoch:
    """An epoch of ``epochs`` whose deleted rows are often sent as equal values."""
    epoch = draw(epochs)
    changes = []
    for change in epoch.changes:
        spec = harness.specs[change.table]
        inserted = {tuple(equal(v) for v in row) for row, w in op_events(change.ops) if w > 0}
        ops = []
        for op in change.ops:
            if (op[0] != "insert" and draw(st.integers(0, 3)) > 0
                    and tuple(equal(v) for v in op[1]) not in inserted
                    and harness.single_valued(spec, op[1])):
                pick = draw(st.integers(0, 5))
                op = (op[0], tuple(twin_of(v, pick) for v in op[1]), *op[2:])
            ops.append(op)
        values: dict[Row, set[Row]] = {}
        for row, _ in op_events(ops):
            values.setdefault(tuple(equal(v) for v in row), set()).add(
                tuple(exact(v) for v in row))
        fmt = change.fmt
        if fmt == "weighted" and any(len(found) > 1 for found in values.values()):
            fmt = "rows"
        changes.append(replace(change, ops=tuple(ops), fmt=fmt))
    return replace(epoch, changes=tuple(changes))


@contextmanager
def process_tz() -> Iterator[Callable[[str], None]]:
    """Set the process's ``TZ`` (DuckDB reads it at every new connection); restored after."""
    saved = os.environ.get("TZ")

    def set_tz(zone: str) -> None:
        os.environ["TZ"] = zone
        time.tzset()

    try:
        yield set_tz
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


SHAPES = ("one", "one", "several", "clear")
"""Epoch shapes: never an empty batch, tables emptied often (more deletes)."""


def run(data: Any, open_session: Callable[[], Any], set_tz: Callable[[str], None],
        epochs: int, reopen_every: int, views: Sequence[str] = tuple(VIEWS)) -> None:
    """Create the tables and views under TZ=America/Los_Angeles, then run ``epochs`` random
    epochs, reopening under another ``TZ`` every ``reopen_every``."""
    set_tz("America/Los_Angeles")  # the oracle's zone too: it connects now
    zones = itertools.cycle(("UTC", "Asia/Tokyo"))
    opened = []

    def connect() -> Any:
        if opened:
            set_tz(next(zones))
        opened.append(True)
        return open_session()

    harness = StoredRowsHarness([KEYED, UNKEYED], DOMAINS, connect=connect)
    try:
        harness.apply(data.draw(harness.strategy(modes=SHAPES), label="warmup"))
        harness.create_views({name: VIEWS[name] for name in views})
        for i in range(epochs):
            harness.apply(data.draw(harness.strategy(modes=SHAPES), label=f"epoch {i + 1}"))
            if (i + 1) % reopen_every == 0:
                harness.reopen()
    finally:
        harness.close()


@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_deletes_of_equal_values(data: st.DataObject,
                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    # Hypothesis draws the simplest workload first (one tiny insert per epoch): skipped.
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    path = tmp_path_factory.mktemp("stored-rows")
    with process_tz() as set_tz:
        run(data, lambda: ivm.connect(path), set_tz, epochs=14, reopen_every=4)


@RANDOM_CDC
@given(data=st.data())
def test_deletes_of_equal_values_on_spark(
    data: st.DataObject, spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assume(data.draw(st.integers(0, 3), label="a random workload") > 0)
    path: Path = tmp_path_factory.mktemp("stored-rows-spark")
    with process_tz() as set_tz:
        run(data, lambda: ivm.connect(path, spark=spark, partitions=SPARK_PARTITIONS), set_tz,
            epochs=2, reopen_every=1, views=("k_values", "u_groups"))
