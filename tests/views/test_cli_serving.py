"""A second reader while (and after) the command line ingests: ``ivm run --serve`` and
``ivm serve`` in subprocesses, read over Arrow Flight and stopped by SIGTERM."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import Served, balance, ivm_cli, location, payments_cdc, recompute_balance

import ivm
from ivm.views.serving import Reader


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
