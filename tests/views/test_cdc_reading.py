"""CDC files read with their table's declared types (``views.cdc_reading``), through the
command line's ``run`` (in this process: ``test_cli`` runs it in a subprocess): DECIMAL
columns from CSV and JSON lines exactly, a header-only file, a value that does not fit,
a Delta change data feed."""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from cli_helpers import PAYMENTS, balance, make_pipeline, payments_cdc, recompute_balance

import ivm
from ivm.views import cli


def cli_run(root: Path, capsys: Any) -> int:
    """``ivm run pipeline.sql --state st --cdc cdc`` from ``root``; its exit status."""
    capsys.readouterr()
    here = Path.cwd()
    os.chdir(root)
    try:
        return cli.main(["run", "pipeline.sql", "--state", "st", "--cdc", "cdc"])
    finally:
        os.chdir(here)


def test_decimal_columns_from_csv_and_json_lines(tmp_path: Path, capsys: Any) -> None:
    root = payments_cdc(tmp_path)
    assert cli_run(root, capsys) == 0
    assert "4 file(s) applied, 0 applied before; epoch 4" in capsys.readouterr().out
    expected = [("a", Decimal("0.40"), 3), ("b", Decimal("1234567890.99"), 1),
                ("c", Decimal("-0.01"), 1)]
    assert recompute_balance(root / "cdc" / "payments") == expected
    with ivm.connect(root / "st") as db:
        assert balance(db.read("balance").to_pylist()) == expected  # exact, not doubles


def test_a_header_only_csv_is_an_epoch_without_changes(tmp_path: Path, capsys: Any) -> None:
    pipeline = make_pipeline(tmp_path)
    (pipeline / "cdc" / "orders" / "0004.csv").write_text("id,customer,amount,day\n")
    assert cli_run(pipeline, capsys) == 0
    out = capsys.readouterr().out
    assert "epoch 3: 0004.csv → orders (no rows: an epoch without changes)" in out
    assert "4 file(s) applied, 0 applied before; epoch 4" in out
    assert cli_run(pipeline, capsys) == 0
    assert "0 file(s) applied, 4 applied before; epoch 4" in capsys.readouterr().out
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
    tmp_path: Path, name: str, text: str, where: str, what: str, capsys: Any
) -> None:
    (tmp_path / "pipeline.sql").write_text(PAYMENTS)
    cdc = tmp_path / "cdc"
    cdc.mkdir()
    (cdc / "payments-0001.csv").write_text("id,account,amount\n1,a,0.10\n")
    (cdc / f"payments-{name}").write_text(text)
    assert cli_run(tmp_path, capsys) == 1
    message = " ".join(capsys.readouterr().err.split())
    assert f"CDC file {Path('cdc') / f'payments-{name}'}: table 'payments', {where}: " \
        f"{what}; nothing was applied" in message, message
    with ivm.connect(tmp_path / "st") as db:
        assert db.epoch == 1 and balance(db.read("balance").to_pylist()) == [
            ("a", Decimal("0.10"), 1)]


def test_a_delta_change_data_feed(tmp_path: Path, capsys: Any) -> None:
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
    assert cli_run(tmp_path, capsys) == 0
    assert "2 file(s) applied, 0 applied before; epoch 2" in capsys.readouterr().out
    con = duckdb.connect()
    expected = sorted(con.sql(
        "SELECT account, SUM(amount), COUNT(*) FROM (SELECT id, account, amount FROM "
        f"read_csv('{cdc}/payments.*.csv', types = {{'amount': 'DECIMAL(12,2)'}}) GROUP BY ALL "
        "HAVING SUM(CASE WHEN _change_type IN ('insert', 'update_postimage') THEN 1 ELSE -1 "
        "END) = 1) GROUP BY account").fetchall())
    assert expected == [("a", Decimal("0.20"), 1), ("b", Decimal("0.15"), 1)]
    with ivm.connect(tmp_path / "st") as db:
        assert balance(db.read("balance").to_pylist()) == expected
