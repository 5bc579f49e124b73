"""Bad command lines of ``ivm`` (views/cli.py): missing and bad files, bad CDC files, unknown
names, bad arguments. ``{root}`` is the case's folder, ``{state}`` its state directory."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bad_input.cases import Case
from ivm import IvmError

PIPELINE = """
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount BIGINT);
CREATE VIEW revenue AS SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer;
"""
"""The pipeline every CLI case's state was made by (``ivm run``)."""

USAGE = SystemExit
"""The error of a command line argparse refuses (exit status 2, usage on stderr)."""


def write_files(root: Path) -> None:
    """The files the CLI cases name, under ``root``."""
    (root / "pipeline.sql").write_text(PIPELINE)
    (root / "bad.sql").write_text("CREATE TABLE orders (id BIGINT PRIMARY KEY,")
    (root / "changed.sql").write_text(PIPELINE + "CREATE VIEW e AS SELECT zz FROM orders;\n")
    (root / "good" / "orders").mkdir(parents=True)
    (root / "good" / "orders" / "0001.csv").write_text("id,customer,amount\n1,ada,5\n")
    folders = {
        "stray": ("stray.csv", "a\n1\n"),
        "wrongtype": ("orders/0001.csv", "id,customer,amount\n7,ada,lots\n"),
        "missingcol": ("orders/0001.csv", "id,customer\n7,ada\n"),
        "garbage": ("orders/0001.jsonl", "{not json\n"),
        "corrupt": ("orders/0001.parquet", "PAR1 this is not parquet"),
        "absent": ("orders/0001.jsonl", json.dumps({"id": 77, "customer": "x", "amount": 1,
                                                    "__w": -1}) + "\n"),
        "dupkey": ("orders/0001.csv", "id,customer,amount\n1,ada,9\n"),
        "nullkey": ("orders/0001.jsonl", json.dumps({"id": None, "customer": "x",
                                                     "amount": 1}) + "\n"),
    }
    for folder, (name, text) in folders.items():  # names unlike the applied 0001.csv's
        path = root / folder / name.replace("0001", f"0002-{folder}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    nested = root / "wrongparquet" / "orders" / "0002.parquet"
    nested.parent.mkdir(parents=True)
    pq.write_table(pa.table({"id": [8], "customer": [["a", "b"]], "amount": [1]}), nested)
    (root / "foreign").mkdir()
    (root / "afile").write_text("not a state directory")


def cli(id_: str, argv: str, *words: str, error: type[BaseException] = IvmError) -> Case:
    """``ivm ARGV`` (split as a shell would) must fail with ``words`` on stderr."""
    return Case(id_, "cli", tuple(shlex.split(argv)), error, words, setup="cli")  # type: ignore[arg-type]


RUN = "run {root}/pipeline.sql --state {state} --cdc {root}/"

CASES: list[Case] = [
    cli("cli-run-missing-sql-file", "run {root}/missing.sql --state {state}", "missing.sql"),
    cli("cli-run-bad-sql", "run {root}/bad.sql --state {state}", "line 1"),
    cli("cli-run-failing-view", "run {root}/changed.sql --state {state}", "'zz'"),
    cli("cli-run-missing-cdc-folder", RUN + "nowhere", "nowhere"),
    cli("cli-run-stray-cdc-file", RUN + "stray", "stray.csv"),
    cli("cli-run-cdc-wrong-type", RUN + "wrongtype", "'orders'", "'amount'"),
    cli("cli-run-cdc-missing-column", RUN + "missingcol", "'orders'", "'amount'"),
    cli("cli-run-cdc-garbage-json", RUN + "garbage", "0002-garbage.jsonl"),
    cli("cli-run-cdc-corrupt-parquet", RUN + "corrupt", "0002-corrupt.parquet"),
    cli("cli-run-cdc-nested-mismatch", RUN + "wrongparquet", "'orders'", "'customer'"),
    cli("cli-run-cdc-absent-delete", RUN + "absent", "'orders'", "77"),
    cli("cli-run-cdc-duplicate-key", RUN + "dupkey", "'orders'", "'id': 1"),
    cli("cli-run-cdc-null-key", RUN + "nullkey", "'orders'", "'id'"),
    cli("cli-run-state-is-a-file", "run {root}/pipeline.sql --state {root}/afile", "afile"),
    cli("cli-sql-write", 'sql {state} "DELETE FROM orders"', "read-only"),
    cli("cli-sql-unknown-table", 'sql {state} "SELECT * FROM nope"', "nope"),
    cli("cli-sql-no-state", 'sql {root}/nowhere "SELECT 1"', "nowhere"),
    cli("cli-show-unknown", "show {state} nope", "'nope'"),
    cli("cli-show-foreign-directory", "show {root}/foreign revenue", "foreign"),
    cli("cli-explain-unknown", "explain {state} nope", "'nope'"),
    cli("cli-explain-a-table", "explain {state} orders", "'orders'"),
    cli("cli-explain-output-nowhere", "explain {state} revenue --output {root}/no/dir/plan.txt",
        "plan.txt"),
    cli("cli-check-no-state", 'check {root}/nowhere "SELECT 1"', "nowhere"),
    cli("cli-status-state-is-a-file", "status {root}/afile", "afile"),
    cli("cli-usage-unknown-command", "frobnicate {state}", "frobnicate", error=USAGE),
    cli("cli-usage-bad-format", "explain {state} revenue --format jpeg", "'jpeg'", error=USAGE),
    cli("cli-usage-bad-limit", "show {state} revenue --limit many", "'many'", error=USAGE),
    cli("cli-usage-missing-state", "run {root}/pipeline.sql", "--state", error=USAGE),
    cli("cli-usage-bad-port", "serve {state} --port http", "'http'", error=USAGE),
]
"""Every bad command line of the corpus."""
