"""Spark mode at a console (issue #27): a batch ivm rejects is reported as one clean
``ivm.IvmError``, with no Java stack trace or Py4J traceback on the terminal.

The session runs in a child process on ``local[1]`` (as ``ivm --spark local[1]`` would),
so everything Spark prints, on the JVM's side too, is caught. A JVM of its own costs
≈30 s or more: the deep profile (``make test-deep``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHILD = '''
import sys
import ivm
from ivm.views.spark.cli_session import spark_for_cli

with spark_for_cli("local[1]") as spark:
    db = ivm.connect(sys.argv[1], spark=spark, partitions=2)
    db.execute("""
        CREATE TABLE t (id BIGINT PRIMARY KEY, s VARCHAR NOT NULL);
        CREATE VIEW strict AS SELECT CAST(s AS BIGINT) AS n FROM t WHERE id < 0;
    """)
    db.ingest("t", [{"id": 1, "s": "a"}])
    rejected = {
        "duplicate key": spark.createDataFrame([(1, "b")], "id long, s string"),
        "null": spark.createDataFrame([(2, None)], "id long, s string"),
        "lossy cast": spark.createDataFrame([("x", "b")], "id string, s string"),
        "failing view": spark.createDataFrame([(-1, "q")], "id long, s string"),
    }
    for name, batch in rejected.items():
        try:
            db.ingest("t", batch)
        except ivm.IvmError as error:
            print(f"caught {name}: {type(error).__name__}", flush=True)
    print("epoch", db.epoch, db.read("t").to_pylist(), flush=True)
    db.close()
'''

EXPECTED = {
    "duplicate key": "ConstraintError",
    "null": "ConstraintError",
    "lossy cast": "SchemaError",
    "failing view": "ExecutionError",  # fails inside a Spark task
}
JAVA_NOISE = ("at org.apache", "py4j", "traceback", "exception in task", "error executor",
              "error tasksetmanager")
"""What a Java stack trace or a Py4J traceback leaves on the console (lower case)."""


@pytest.mark.deep
def test_a_rejected_batch_prints_no_java_stack_trace(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "s")],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    console = done.stdout + done.stderr
    assert done.returncode == 0, console
    caught = dict(line.removeprefix("caught ").split(": ")
                  for line in done.stdout.splitlines() if line.startswith("caught "))
    assert caught == EXPECTED, console
    assert "epoch 1 [{'id': 1, 's': 'a'}]" in done.stdout  # every rejected batch undone
    noise = [n for n in JAVA_NOISE if n in console.lower()]
    assert not noise, console
