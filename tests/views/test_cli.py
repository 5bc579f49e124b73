"""The ``ivm`` command line end to end (issue #27, item 2): each command in a subprocess,
as a user runs it, over CDC files in Parquet, CSV and JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ivm

PIPELINE = """
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT, day DATE);
CREATE TABLE customers (name VARCHAR PRIMARY KEY, region VARCHAR);
CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer;
CREATE VIEW by_region AS
    SELECT region, SUM(amount) AS total FROM orders JOIN customers ON customer = name
    GROUP BY region;
"""


def ivm_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``ivm ARGS`` in a subprocess (the module, so an uninstalled checkout runs it too)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "ivm.views.cli", *map(str, args)], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=300, check=False,
    )


def jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    (tmp_path / "pipeline.sql").write_text(PIPELINE)
    cdc = tmp_path / "cdc"
    (cdc / "orders").mkdir(parents=True)
    (cdc / "orders" / "0001.csv").write_text(
        "id,customer,amount,day\n1,ada,10,2026-01-01\n2,bob,5,2026-01-02\n3,bob,1,2026-01-02\n"
    )
    jsonl(cdc / "orders" / "0002.jsonl", [  # Debezium: an update, a key-only delete
        {"op": "u", "before": {"id": 1, "customer": "ada", "amount": 10, "day": "2026-01-01"},
         "after": {"id": 1, "customer": "ada", "amount": 12, "day": "2026-01-01"}},
        {"op": "d", "before": {"id": 2}},
    ])
    jsonl(cdc / "customers-0001.jsonl", [{"name": "ada", "region": "eu"},
                                         {"name": "bob", "region": "us"}])
    return tmp_path


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


def test_reading_commands(pipeline: Path) -> None:
    assert ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc",
                   cwd=pipeline).returncode == 0
    show = ivm_cli("show", "st", "revenue", cwd=pipeline)
    assert show.returncode == 0 and "ada" in show.stdout and "2 row(s)" in show.stdout
    sql = ivm_cli("sql", "st", "SELECT region, total FROM by_region", cwd=pipeline)
    assert "eu" in sql.stdout and "12" in sql.stdout
    status = ivm_cli("status", "st", cwd=pipeline)
    assert "epoch 3" in status.stdout and "by_region" in status.stdout
    assert "last epoch" in status.stdout
    explain = ivm_cli("explain", "st", "revenue", cwd=pipeline)
    assert "InvertibleAggregate" in explain.stdout
    picture = ivm_cli("explain", "st", "revenue", "--format", "dot", "--output", "plan.dot",
                      cwd=pipeline)
    assert picture.returncode == 0 and (pipeline / "plan.dot").read_text().startswith("digraph")
    check = ivm_cli("check", "st", "SELECT customer, COUNT(*) AS n FROM orders GROUP BY 1",
                    cwd=pipeline)
    assert check.returncode == 0 and check.stdout.startswith("maintained")
    refused = ivm_cli("check", "st", "SELECT random() AS r FROM orders", cwd=pipeline)
    assert refused.returncode == 2 and "refused: non-deterministic" in refused.stdout


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
    from ivm.views import cli

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


def test_status_and_explain_read_the_recorded_epochs(pipeline: Path) -> None:
    # Each command is a process of its own: what they print of the views' epochs comes
    # from the state (views.relation_times), not from a session's memory.
    import re  # (here: this test is appended whole, to keep merges of this file trivial)

    assert ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc",
                   cwd=pipeline).returncode == 0
    status = ivm_cli("status", "st", cwd=pipeline)
    assert status.returncode == 0, status.stderr
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
