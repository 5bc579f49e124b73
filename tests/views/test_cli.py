"""The ``ivm`` command line end to end (issue #27, item 2): each command in a subprocess,
as a user runs it, over CDC files in Parquet, CSV and JSON lines."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ivm
from ivm.views.serving import Reader

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


# -- CSV and JSON lines read with the table's declared types ---------------------------------

PAYMENTS = """
CREATE TABLE payments (id BIGINT PRIMARY KEY, account VARCHAR, amount DECIMAL(12,2));
CREATE VIEW balance AS SELECT account, SUM(amount) AS total, COUNT(*) AS n FROM payments
    GROUP BY account;
"""
ROW = "STRUCT(id BIGINT, account VARCHAR, amount DECIMAL(12,2))"
"""A payments row, as the recomputation reads the files (its own types, given)."""


def payments_cdc(root: Path) -> Path:
    """A payments pipeline whose amounts DuckDB would guess as DOUBLE: CSV rows, JSON-lines
    rows, weighted rows and a Debezium update (0.1 + 0.2 summed as doubles is not 0.3)."""
    (root / "pipeline.sql").write_text(PAYMENTS)
    cdc = root / "cdc" / "payments"
    cdc.mkdir(parents=True)
    (cdc / "0001.csv").write_text(
        "id,account,amount\n1,a,0.10\n2,a,0.20\n3,b,1234567890.99\n4,b,10.25\n")
    jsonl(cdc / "0002.jsonl", [{"id": 5, "account": "a", "amount": 0.05},
                               {"id": 6, "account": "c", "amount": 7}])
    jsonl(cdc / "0003.jsonl", [{"id": 4, "account": "b", "amount": 10.25, "__w": -1},
                               {"id": 7, "account": "c", "amount": -0.01, "__w": 1}])
    jsonl(cdc / "0004.jsonl", [
        {"op": "u", "before": {"id": 1, "account": "a", "amount": 0.1},
         "after": {"id": 1, "account": "a", "amount": 0.15}},
        {"op": "d", "before": {"id": 6, "account": "c", "amount": 7}},
    ])
    return root


def recompute_balance(cdc: Path) -> list[tuple]:
    """The balance view recomputed by DuckDB over the CDC files (read with the types
    given here), the changes summed by weight."""
    def read_json(name: str, columns: str) -> str:
        return f"read_json('{cdc / name}', columns = {{{columns}}})"

    plain = "'id': 'BIGINT', 'account': 'VARCHAR', 'amount': 'DECIMAL(12,2)'"
    weighted = plain + ", '__w': 'BIGINT'"
    debezium = read_json("0004.jsonl", f"'op': 'VARCHAR', 'before': '{ROW}', 'after': '{ROW}'")
    changes = " UNION ALL ".join([
        f"SELECT *, 1 AS w FROM read_csv('{cdc / '0001.csv'}', "
        "types = {'amount': 'DECIMAL(12,2)'})",
        f"SELECT *, 1 FROM {read_json('0002.jsonl', plain)}",
        f"SELECT * FROM {read_json('0003.jsonl', weighted)}",
        f"SELECT after.*, 1 FROM {debezium} WHERE op IN ('c', 'r', 'u')",
        f"SELECT before.*, -1 FROM {debezium} WHERE op IN ('u', 'd')",
    ])
    con = duckdb.connect()
    con.execute(f"CREATE TABLE payments AS SELECT id, account, amount FROM ({changes}) "
                "GROUP BY ALL HAVING SUM(w) = 1")
    return sorted(con.sql("SELECT account, SUM(amount), COUNT(*) FROM payments "
                          "GROUP BY account").fetchall())


def balance(rows: list[dict]) -> list[tuple]:
    return sorted((r["account"], r["total"], r["n"]) for r in rows)


def test_decimal_columns_from_csv_and_json_lines(tmp_path: Path) -> None:
    root = payments_cdc(tmp_path)
    run = ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc", cwd=root)
    assert run.returncode == 0, run.stderr
    assert "4 file(s) applied, 0 applied before; epoch 4" in run.stdout
    expected = [("a", Decimal("0.40"), 3), ("b", Decimal("1234567890.99"), 1),
                ("c", Decimal("-0.01"), 1)]
    assert recompute_balance(root / "cdc" / "payments") == expected
    with ivm.connect(root / "st") as db:
        assert balance(db.read("balance").to_pylist()) == expected  # exact, not doubles


def test_a_header_only_csv_is_an_epoch_without_changes(pipeline: Path) -> None:
    (pipeline / "cdc" / "orders" / "0004.csv").write_text("id,customer,amount,day\n")
    run = ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc", cwd=pipeline)
    assert run.returncode == 0, run.stderr
    assert "epoch 3: 0004.csv → orders (no rows: an epoch without changes)" in run.stdout
    assert "4 file(s) applied, 0 applied before; epoch 4" in run.stdout
    again = ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc", cwd=pipeline)
    assert "0 file(s) applied, 4 applied before; epoch 4" in again.stdout  # recorded
    with ivm.connect(pipeline / "st") as db:
        assert sorted(map(str, db.read("revenue").to_pylist())) == \
            sorted(map(str, db.sql(db.views["revenue"].sql).to_pylist()))


@pytest.mark.parametrize(("name", "text", "where", "what"), [
    ("0002.csv", "id,account,amount\n9,a,1.00\n8,a,abc\n",
     "column 'amount'", "value 'abc' does not fit its type DECIMAL(12,2)"),
    ("0002.jsonl", '{"id": 8, "account": "a", "amount": 1.255}\n',
     "column 'amount'", "value 1.255 has more decimal places than DECIMAL(12,2) keeps"),
    ("0002.json", '{"op": "c", "after": {"id": "x8", "account": "a", "amount": 1}}\n',
     "column 'id' (in 'after')", "value 'x8' does not fit its type BIGINT"),
])
def test_a_value_that_does_not_fit_stops_the_run(
    tmp_path: Path, name: str, text: str, where: str, what: str,
) -> None:
    (tmp_path / "pipeline.sql").write_text(PAYMENTS)
    cdc = tmp_path / "cdc"
    cdc.mkdir()
    (cdc / "payments-0001.csv").write_text("id,account,amount\n1,a,0.10\n")
    (cdc / f"payments-{name}").write_text(text)
    run = ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc", cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    message = " ".join(run.stderr.split())
    assert f"CDC file {Path('cdc') / f'payments-{name}'}: table 'payments', {where}: " \
        f"{what}; nothing was applied" in message, message
    with ivm.connect(tmp_path / "st") as db:
        assert db.epoch == 1 and balance(db.read("balance").to_pylist()) == [
            ("a", Decimal("0.10"), 1)]


def test_a_delta_change_data_feed(tmp_path: Path) -> None:
    (tmp_path / "pipeline.sql").write_text(PAYMENTS)
    cdc = tmp_path / "cdc"
    cdc.mkdir()
    (cdc / "payments.1.csv").write_text(
        "_change_type,_commit_version,_commit_timestamp,id,account,amount\n"
        "insert,1,2026-01-01 10:00:00,1,a,0.10\n"
        "insert,1,2026-01-01 10:00:00,2,a,0.20\n"
        "insert,1,2026-01-01 10:00:00,3,b,5.00\n")
    (cdc / "payments.2.csv").write_text(
        "_change_type,_commit_version,_commit_timestamp,id,account,amount\n"
        "update_preimage,2,2026-01-02 10:00:00,1,a,0.10\n"
        "update_postimage,2,2026-01-02 10:00:00,1,b,0.15\n"
        "delete,3,2026-01-03 10:00:00,3,b,5.00\n")
    run = ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "2 file(s) applied, 0 applied before; epoch 2" in run.stdout
    con = duckdb.connect()
    expected = sorted(con.sql(
        "SELECT account, SUM(amount), COUNT(*) FROM (SELECT id, account, amount FROM "
        f"read_csv('{cdc}/payments.*.csv', types = {{'amount': 'DECIMAL(12,2)'}}) GROUP BY ALL "
        "HAVING SUM(CASE WHEN _change_type IN ('insert', 'update_postimage') THEN 1 ELSE -1 "
        "END) = 1) GROUP BY account").fetchall())
    assert expected == [("a", Decimal("0.20"), 1), ("b", Decimal("0.15"), 1)]
    with ivm.connect(tmp_path / "st") as db:
        assert balance(db.read("balance").to_pylist()) == expected


# -- serving: a second reader while (and after) the command line ingests ---------------------


class Served:
    """``ivm ARGS`` started in a subprocess, its standard output read line by line."""

    def __init__(self, *args: str, cwd: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ivm.views.cli", *args], cwd=cwd, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put("")  # the end

    def until(self, text: str, timeout: float = 60) -> str:
        """The first line holding ``text`` (the lines before it kept in ``seen``)."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            self.seen.append(line)
            if text in line:
                return line
            if not line:
                raise AssertionError(f"no {text!r} in {self.seen}; {self.stop()}")

    def stop(self) -> tuple[int, str]:
        """SIGTERM; the exit status and standard error."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        finally:
            self.process.kill()
        assert self.process.stderr is not None
        return self.process.returncode, self.process.stderr.read()


def location(line: str) -> str:
    return line.split(" at ", 1)[1].split()[0]


def test_run_serves_the_views_while_it_applies_the_files(tmp_path: Path) -> None:
    root = payments_cdc(tmp_path)
    served = Served("run", "pipeline.sql", "--state", "st", "--cdc", "cdc", "--serve", "0",
                    cwd=root)
    try:
        where = location(served.until("serving st at grpc://127.0.0.1:"))
        served.until("4 file(s) applied, 0 applied before; epoch 4")
        assert served.until("serving until Ctrl-C or SIGTERM")
        with Reader(where) as reader:
            assert reader.epoch == 4
            assert sorted(tuple(r.values()) for r in reader.read("balance").to_pylist()) == \
                recompute_balance(root / "cdc" / "payments")
            with pytest.raises(ivm.SqlError, match="read-only query"):
                reader.sql("DELETE FROM payments")
    finally:
        status, errors = served.stop()
    assert status == 0, errors
    assert "Traceback" not in errors and served.until("stopped serving")
    with ivm.connect(root / "st") as db:  # closed cleanly: reopens, exact
        assert db.epoch == 4
        assert balance(db.read("balance").to_pylist()) == recompute_balance(
            root / "cdc" / "payments")


def test_serve_in_a_subprocess(tmp_path: Path) -> None:
    root = payments_cdc(tmp_path)
    assert ivm_cli("run", "pipeline.sql", "--state", "st", "--cdc", "cdc",
                   cwd=root).returncode == 0
    served = Served("serve", "st", "--port", "0", cwd=root)
    try:
        where = location(served.until("serving st at grpc://127.0.0.1:"))
        with Reader(where) as reader:
            assert reader.epoch == 4
            assert sorted(tuple(r.values()) for r in reader.read("balance").to_pylist()) == \
                recompute_balance(root / "cdc" / "payments")
        held = ivm_cli("status", "st", cwd=root)  # the server holds the state
        assert held.returncode == 1 and "Traceback" not in held.stderr
    finally:
        status, errors = served.stop()
    assert status == 0 and "Traceback" not in errors, errors
    with ivm.connect(root / "st") as db:
        assert db.epoch == 4
