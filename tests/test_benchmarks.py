"""Every benchmark runs to its end on a tiny input (deep profile).

A benchmark is never run by ``make test``, so nothing else notices when a change to the
package breaks one (``bench_wcoj`` read ``Session.arrangements`` for a session after the
attribute had become private, and failed after all its timings). Each runs here as a
subprocess from the repository's root, as the docs show, with the smallest input its
options allow; it must exit 0, which includes its own check that every view equals
DuckDB's recomputation. Timings are printed, never asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

RUNS = {
    "bench_aggregate": ["--rows", "20000", "--customers", "500", "--repeats", "1",
                        "--sizes", "100", "--workloads", "decimal,double"],
    "bench_asof": ["--quick"],
    "bench_faq": ["--rows", "500", "--keys", "100", "--changes", "10", "--repeats", "1"],
    "bench_fixed_cost": ["--rows", "2000", "--epochs", "3"],
    "bench_from_clause": ["--rows", "20000", "--customers", "500", "--repeats", "1",
                          "--sizes", "100"],
    "bench_recursive": ["--quick"],
    "bench_reopen": ["--quick"],
    "bench_sql_breadth": ["--rows", "20000", "--customers", "500", "--repeats", "1",
                          "--sizes", "100"],
    "bench_statement_floor": ["--repeats", "3"],
    "bench_tpcds": ["--only", "q01,q09", "--epochs", "1"],
    "bench_tpch": ["--sf", "0.01", "--only", "q01,q05", "--batches", "1",
                   "--aggregate-plans", "flat,factorized"],
    "bench_wcoj": ["--quick"],
}


@pytest.mark.deep
@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_benchmark_runs_to_its_end(name: str) -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *RUNS[name]]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    said = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{' '.join(command[1:])}:\n{said}"


def test_every_benchmark_is_run_or_said_why_not() -> None:
    """A new benchmark gets a tiny run above, or a reason here."""
    elsewhere = {
        "bench_soak": "tests/test_soak.py runs a short soak",
        "bench_spark": "a Spark session of its own per run; its views are tests/views/"
                       "test_spark_mode.py's",
    }
    found = {p.stem for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert found == set(RUNS) | set(elsewhere), found ^ (set(RUNS) | set(elsewhere))
