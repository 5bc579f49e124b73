"""The DuckDB settings views evaluate under are kept with the state (issue #22, defect 4).

``CAST(ts AS DATE)`` of a TIMESTAMPTZ depends on DuckDB's ``TimeZone``, which
follows the process's ``TZ``. State loaded under ``TZ=UTC`` and reopened under
``TZ=America/Los_Angeles`` must evaluate as it did: the delete of a row retracts
what its insert emitted. The settings are recorded when the state is created,
applied at every open (the Spark tasks' connections too), chosen with
``settings=`` at creation only, and recorded at first open for older state.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from oracle.spark import SPARK_PARTITIONS

import ivm

UTC = datetime.UTC
DDL = """
    CREATE TABLE t (id BIGINT PRIMARY KEY, ts TIMESTAMPTZ);
    CREATE VIEW v AS SELECT id, CAST(ts AS DATE) AS d, hour(ts) AS h,
                            CAST(date_trunc('day', ts) AS VARCHAR) AS day FROM t;
    CREATE VIEW g AS SELECT CAST(ts AS DATE) AS d, COUNT(*) AS n FROM t GROUP BY CAST(ts AS DATE);
"""
INSTANT = datetime.datetime(2024, 1, 2, 3, 0, tzinfo=UTC)  # Jan 1, 19:00 in Los Angeles


@pytest.fixture
def process_tz() -> Iterator[Callable[[str], None]]:
    """Set the process's ``TZ`` (DuckDB reads it at every new connection); restored after."""
    saved = os.environ.get("TZ")

    def set_tz(zone: str) -> None:
        os.environ["TZ"] = zone
        time.tzset()

    yield set_tz
    if saved is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = saved
    time.tzset()


def reopened_under_another_tz(
    connect: Callable[[], Any], set_tz: Callable[[str], None], zone: str, hour: int, day: str
) -> None:
    """Load under TZ=``zone``, reopen under TZ=America/Los_Angeles, delete the row: the
    table, the views and the returned deltas agree with what the insert emitted (the
    instant is ``hour`` o'clock on Jan 2 in ``zone``, Jan 1 in Los Angeles)."""
    set_tz(zone)
    with connect() as db:
        db.execute(DDL)
        inserted = db.ingest("t", [{"id": 1, "ts": INSTANT}])
        assert inserted["v"].to_pylist()[0]["h"] == hour
    set_tz("America/Los_Angeles")
    with connect() as db:
        assert db.settings["TimeZone"] == zone
        deltas = db.ingest("t", [{"id": 1, "ts": INSTANT, "__w": -1}])
        assert db.read("t").num_rows == 0
        assert db.read("v").num_rows == 0 and db.read("g").num_rows == 0
        assert deltas["v"].to_pylist() == [
            {"id": 1, "d": datetime.date(2024, 1, 2), "h": hour, "day": day, "__w": -1}
        ]
        assert deltas["g"].to_pylist() == [{"d": datetime.date(2024, 1, 2), "n": 1, "__w": -1}]
        assert db.sql("SELECT CAST(TIMESTAMPTZ '2024-01-02 03:00:00+00' AS DATE) AS d"
                      ).to_pylist() == [{"d": datetime.date(2024, 1, 2)}]


def test_reopening_under_another_tz_changes_nothing(
    tmp_path: Path, process_tz: Callable[[str], None]
) -> None:
    """The issue's case: loaded under TZ=UTC, reopened under TZ=America/Los_Angeles."""
    reopened_under_another_tz(
        lambda: ivm.connect(tmp_path), process_tz, "UTC", 3, "2024-01-02 00:00:00+00"
    )


def test_reopening_under_another_tz_changes_nothing_on_spark(
    spark: Any, tmp_path: Path, process_tz: Callable[[str], None]
) -> None:
    """The driver's TZ changes; its tasks evaluate as recorded, whatever their executors'
    TZ (neither the driver's old nor its new one: Tokyo's hour differs from both)."""
    reopened_under_another_tz(
        lambda: ivm.connect(tmp_path, spark=spark, partitions=SPARK_PARTITIONS), process_tz,
        "Asia/Tokyo", 12, "2024-01-02 00:00:00+09",
    )


def test_settings_chosen_at_creation_hold_at_every_open(
    tmp_path: Path, process_tz: Callable[[str], None]
) -> None:
    process_tz("UTC")
    with ivm.connect(tmp_path, settings={"TimeZone": "Asia/Tokyo"}) as db:
        db.execute(DDL)
        db.ingest("t", [{"id": 1, "ts": INSTANT}])  # 12:00 in Tokyo
        assert db.read("v").to_pylist()[0]["h"] == 12
        assert db.sql("SELECT current_setting('TimeZone') AS z").to_pylist() == [
            {"z": "Asia/Tokyo"}
        ]
    with ivm.connect(tmp_path) as db:
        assert db.settings["TimeZone"] == "Asia/Tokyo"
        assert db.ingest("t", [{"id": 2, "ts": INSTANT}])["v"].to_pylist()[0]["h"] == 12
    with ivm.connect(tmp_path, settings={"timezone": "Asia/Tokyo", "Calendar": "gregorian"}):
        pass  # the same values: no conflict (names ignore case)
    with pytest.raises(ivm.StateError, match=r"TimeZone='Asia/Tokyo'.*open it without settings="):
        ivm.connect(tmp_path, settings={"TimeZone": "UTC"})
    with ivm.connect(tmp_path) as db:  # a refused open changed nothing
        assert db.settings["TimeZone"] == "Asia/Tokyo" and db.epoch == 2


def test_an_in_memory_session_takes_its_settings_at_connect() -> None:
    with ivm.connect(settings={"TimeZone": "America/Los_Angeles"}) as db:
        db.execute(DDL)
        assert db.ingest("t", [{"id": 1, "ts": INSTANT}])["v"].to_pylist()[0]["d"] == (
            datetime.date(2024, 1, 1)
        )


@pytest.mark.parametrize(("settings", "message"), [
    ({"TimeZone": "Nowhere/Bogus"}, "Unknown TimeZone"),
    ({"default_order": "DESC"}, "keeps DuckDB's default"),
    ({"threads": "1"}, "unknown setting 'threads'"),
    ({"TimeZone": 3}, "takes a string"),
    ("UTC", "takes a dict"),
])
def test_settings_ivm_cannot_honour_are_refused(settings: Any, message: str) -> None:
    with pytest.raises(ivm.IvmError, match=message):
        ivm.connect(settings=settings)


def test_state_without_recorded_settings_records_them_at_first_open(
    tmp_path: Path, process_tz: Callable[[str], None]
) -> None:
    """Older state (or a version that recorded fewer): the values of the first open that
    records them hold from then on."""
    with ivm.connect(tmp_path) as db:
        db.execute(DDL)
        db.ingest("t", [{"id": 1, "ts": INSTANT}])
    raw = duckdb.connect(str(tmp_path / "ivm.duckdb"))
    raw.execute("DROP TABLE __ivm_settings")
    raw.close()
    process_tz("America/Los_Angeles")
    with ivm.connect(tmp_path) as db:
        assert db.settings["TimeZone"] == "America/Los_Angeles"
    raw = duckdb.connect(str(tmp_path / "ivm.duckdb"))
    raw.execute("DELETE FROM __ivm_settings WHERE name = 'Calendar'")
    raw.execute("UPDATE __ivm_settings SET value = 'NULLS_FIRST' WHERE name = 'default_null_order'")
    raw.close()
    process_tz("UTC")
    with ivm.connect(tmp_path) as db:
        assert db.settings["TimeZone"] == "America/Los_Angeles"
        assert db.settings["Calendar"] == "gregorian"
        assert db.sql("SELECT current_setting('default_null_order') AS o").to_pylist() == [
            {"o": "NULLS_FIRST"}  # recorded, so applied (ivm never records another value)
        ]
