"""The ``ivm`` command line end to end (issue #27, item 2): each command as a user runs
it, over CDC files in Parquet, CSV and JSON lines: in a subprocess (``run``, ``status``,
``explain --analyze``, the errors, ``--help``), or, where only the printing is tested,
through ``cli.main`` in this process. Typed CDC reading: ``test_cdc_reading``; serving:
``test_cli_serving``."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_helpers import ivm_cli, make_pipeline

import ivm
from ivm.views import cli


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    return make_pipeline(tmp_path)


def test_run_applies_each_file_once(pipeline: Path) -> None:
    result = ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc", cwd=pipeline)
    assert result.returncode == 0, result.stderr
    assert "created view by_region" in result.stdout
    assert "epoch 1: 0001.csv → orders" in result.stdout
    assert "3 file(s) applied, 0 applied before; epoch 3" in result.stdout
    again = ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc", cwd=pipeline)
    assert "0 file(s) applied, 3 applied before; epoch 3" in again.stdout
    weighted = pa.table({"id": [3, 4], "customer": ["bob", "cy"], "amount": [1, 8],
                         "day": pa.array([date(2026, 1, 2), None], pa.date32()),
                         "__w": [-1, 1]})
    pq.write_table(weighted, pipeline / "cdc" / "orders" / "0003.parquet")
    third = ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc", cwd=pipeline)
    assert "epoch 4: 0003.parquet → orders" in third.stdout, third.stderr
    with ivm.connect(pipeline / "st") as db:
        assert sorted(db.read("revenue").to_pylist(), key=lambda r: r["customer"]) == [
            {"customer": "ada", "total": 12}, {"customer": "cy", "total": 8}]
        for name, view in db.views.items():
            assert sorted(map(str, db.read(name).to_pylist())) == \
                sorted(map(str, db.sql(view.sql).to_pylist())), name


def test_reading_commands(pipeline: Path, capsys: Any, monkeypatch: Any) -> None:
    # Each subprocess is a session of its own: what status and explain print of the
    # views' epochs comes from the state (views.relation_times), not from memory.
    assert ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc",
                   cwd=pipeline).returncode == 0
    status = ivm_cli("status", "st", cwd=pipeline)
    assert status.returncode == 0, status.stderr
    assert "epoch 3" in status.stdout and "last epoch" in status.stdout
    lines = {line.split()[1]: line for line in status.stdout.splitlines()
             if line.startswith("│") and len(line.split()) > 1}
    # revenue: orders changed in epochs 1 and 2 (its last change: ada 10 → 12, bob 6 → 1);
    # by_region: every epoch (customers arrive in epoch 3). Cells: last change, its time,
    # the median, the epochs that changed it.
    assert re.search(r"│ 4 rows, epoch 2 +│ [\d.]+ ms +│ [\d.]+ ms +│ 2 +│", lines["revenue"])
    assert re.search(r"│ 2 rows, epoch 3 +│ [\d.]+ ms +│ [\d.]+ ms +│ 3 +│", lines["by_region"])
    assert re.search(r"│ 2 rows, epoch 3 +│ [\d.]+ ms +│ [\d.]+ ms +│ 1 +│", lines["customers"])
    explain = ivm_cli("explain", "st", "by_region", "--analyze", cwd=pipeline)
    assert explain.returncode == 0, explain.stderr
    assert "last epoch 3 (recorded in the state" in explain.stdout
    assert "no epoch has run" not in explain.stdout
    assert re.search(r"\[[\d.]+ ms, \d+ statements?, [\d,]+ rows\]", explain.stdout)
    monkeypatch.chdir(pipeline)

    def printed(*args: str, status: int = 0) -> str:
        capsys.readouterr()
        try:
            code = cli.main(list(args))
        except SystemExit as exit:  # check's exit status 2 (refused)
            code = exit.code
        assert code == status
        return capsys.readouterr().out

    show = printed("show", "st", "revenue")
    assert "ada" in show and "2 row(s)" in show
    sql = printed("sql", "st", "SELECT region, total FROM by_region")
    assert "eu" in sql and "12" in sql
    assert "InvertibleAggregate" in printed("explain", "st", "revenue")
    printed("explain", "st", "revenue", "--format", "dot", "--output", "plan.dot")
    assert (pipeline / "plan.dot").read_text().startswith("digraph")
    check = printed("check", "st", "SELECT customer, COUNT(*) AS n FROM orders GROUP BY 1")
    assert check.startswith("maintained")
    refused = printed("check", "st", "SELECT random() AS r FROM orders", status=2)
    assert "refused: non-deterministic" in refused


def test_errors_are_one_line_without_a_traceback(pipeline: Path) -> None:
    missing = ivm_cli("show", "nowhere", "revenue", cwd=pipeline)
    assert missing.returncode == 1 and "ivm: error: no ivm state at nowhere" in missing.stderr
    assert ivm_cli("run", "pipeline.sql", "--state", "st", cwd=pipeline).returncode == 0
    bad = ivm_cli("sql", "st", "DELETE FROM orders", cwd=pipeline)
    assert bad.returncode == 1 and "read-only query" in bad.stderr
    assert "Traceback" not in bad.stderr + missing.stderr
    (pipeline / "cdc" / "stray.csv").write_text("a\n1\n")
    stray = ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc", cwd=pipeline)
    assert stray.returncode == 1 and "no table is named" in stray.stderr


def test_the_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "ivm"
    if not script.exists():
        pytest.skip("ivm is not installed as a console script here (pip install -e .)")
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0 and "status" in result.stdout


def test_spark_mode_from_the_command_line(pipeline: Path, spark: Any, capsys: Any) -> None:
    # In this process the command line takes the SparkSession already running (the
    # tests'); from a shell it starts one on the master given (test below, deep profile).
    state = pipeline / "spark-st"
    common = ["--spark", "local[2]"]
    assert cli.main([*common, "--partitions", "2", "run", str(pipeline / "pipeline.sql"),
                     "--state", str(state), "--cdc", str(pipeline / "cdc")]) == 0
    assert "3 file(s) applied, 0 applied before; epoch 3" in capsys.readouterr().out
    assert cli.main([*common, "show", str(state), "revenue"]) == 0
    assert "2 row(s)" in capsys.readouterr().out
    assert cli.main([*common, "status", str(state)]) == 0
    assert "epoch 3" in capsys.readouterr().out
    assert cli.main(["status", str(state)]) == 1  # without --spark: told how to open it
    assert "created in Spark mode" in capsys.readouterr().err
    assert cli.main(["--partitions", "2", "status", str(state)]) == 1
    assert "--partitions applies to Spark mode" in capsys.readouterr().err
    assert not spark.sparkContext._jsc.sc().isStopped()  # noqa: SLF001 - left running
    with ivm.connect(state, spark=spark) as db:
        for name, view in db.views.items():
            assert sorted(map(str, db.read(name).to_pylist())) == \
                sorted(map(str, db.sql(view.sql).to_pylist())), name


@pytest.mark.deep
def test_spark_mode_from_a_shell(pipeline: Path) -> None:
    run = ivm_cli("--spark", "local[1]", "--partitions", "2", "run", "pipeline.sql",
                  "--state", "st", "--cdc", "cdc", cwd=pipeline)
    assert run.returncode == 0, run.stderr
    assert "epoch 3" in run.stdout
    show = ivm_cli("--spark", "local[1]", "sql", "st", "SELECT region, total FROM by_region",
                   cwd=pipeline)
    assert show.returncode == 0 and "eu" in show.stdout and "12" in show.stdout, show.stderr
