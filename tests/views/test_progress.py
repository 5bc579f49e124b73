"""Progress of long DDL and epochs (``views.progress``): ivm's labelled bar on stderr,
never DuckDB's own on stdout; in both modes."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

import ivm
from ivm.views import progress

# A view slow enough to be seen running: a self-join of 3M rows on few keys.
TABLE = "CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT)"
SLOW = "CREATE VIEW v AS SELECT a.k, COUNT(*) AS n FROM t a JOIN t b ON a.k = b.k GROUP BY a.k"


def test_a_long_backfill_draws_a_labelled_bar_on_stderr(capfd: Any) -> None:
    with ivm.connect() as db:
        db.execute(TABLE)
        db._con.execute("INSERT INTO __ivm_rel_t SELECT range, range % 3, 1 FROM range(3000)")
        db.execute("CREATE VIEW quick AS SELECT k FROM t", progress=False)
        assert capfd.readouterr().err == ""
        polled: list[float | None] = []
        original = progress.statement_progress

        def recording(con: Any) -> Any:
            source = original(con)
            return lambda: polled.append(source()) or polled[-1]

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(progress, "statement_progress", recording)
            patch.setattr(progress, "POLL", 0.01)
            db.execute(SLOW, progress=True)
        out, err = capfd.readouterr()
        assert "running DDL (filling views)" in err and "100%" in err
        assert not re.search(r"\d+%", out)  # DuckDB's own bar is not printed
        assert any(value is not None and 0 <= value <= 100 for value in polled), polled
        expected = {(k, 1000 * 1000) for k in range(3)}
        assert {(r["k"], r["n"]) for r in db.read("v").to_pylist()} == expected


def test_duckdb_never_prints_its_own_bar(capfd: Any, tmp_path: Path) -> None:
    with ivm.connect(tmp_path / "st") as db:
        settings = dict(db._con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name LIKE 'enable_progress%'"
        ).fetchall())
        assert settings["enable_progress_bar_print"] == "false"
        reader = db._reads.cursor()
        assert reader.execute("SELECT current_setting('enable_progress_bar_print')"
                              ).fetchall() == [(False,)]


def test_no_bar_for_quick_work_or_when_asked_not_to(capfd: Any) -> None:
    with ivm.connect() as db:
        db.execute(TABLE + "; CREATE VIEW v AS SELECT k, COUNT(*) AS n FROM t GROUP BY k")
        db.ingest("t", {"id": [1, 2], "k": [1, 1]}, progress=None)  # stderr: not a terminal
        db.ingest("t", {"id": [3], "k": [2]}, progress=False)
        assert capfd.readouterr().err == ""
        with pytest.raises(ivm.IvmError, match="execute: progress= is True, False or None"):
            db.execute("CREATE VIEW w AS SELECT k FROM t", progress="yes")  # type: ignore[arg-type]


def test_an_epoch_in_spark_mode_draws_its_stages(spark: Any, tmp_path: Path,
                                                 capfd: Any, monkeypatch: Any) -> None:
    polled: list[float | None] = []
    from ivm.views.spark import progress as spark_progress

    original = spark_progress.stage_progress

    def recording(session: Any) -> Any:
        source = original(session)
        return lambda: polled.append(source()) or polled[-1]

    monkeypatch.setattr(spark_progress, "stage_progress", recording)
    monkeypatch.setattr(progress, "POLL", 0.01)
    with ivm.connect(tmp_path / "s", spark=spark, partitions=2) as db:
        db.execute(TABLE + "; CREATE VIEW v AS SELECT k, COUNT(*) AS n FROM t GROUP BY k")
        started = time.perf_counter()
        db.ingest("t", {"id": list(range(100)), "k": [i % 4 for i in range(100)]},
                  progress=True)
        assert time.perf_counter() - started > 0.05
        err = capfd.readouterr().err
        assert "epoch 1" in err and "100%" in err
        assert any(value is not None for value in polled), polled  # Spark's stages seen
        assert {(r["k"], r["n"]) for r in db.read("v").to_pylist()} == {(k, 25) for k in range(4)}
