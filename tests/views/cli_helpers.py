"""What the command line's tests share: the pipelines and their CDC files, ``ivm`` run in
a subprocess (``ivm_cli``, or ``Served`` for a server read line by line), and the
recomputation of the payments pipeline by DuckDB."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb

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
    """``rows`` as a JSON-lines file at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_pipeline(root: Path) -> Path:
    """The orders/customers pipeline under ``root``: its SQL and three CDC files (a CSV, a
    Debezium JSON-lines file with an update and a key-only delete, a JSON-lines load)."""
    (root / "pipeline.sql").write_text(PIPELINE)
    cdc = root / "cdc"
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
    return root


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
    """The balance view's rows as sorted tuples."""
    return sorted((r["account"], r["total"], r["n"]) for r in rows)


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
    """The Flight location a ``serving … at LOCATION`` line names."""
    return line.split(" at ", 1)[1].split()[0]
