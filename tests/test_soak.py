"""A short soak (``benchmarks/bench_soak.py``'s driver): the 10 views over 5 tables
through mixed epochs of persistent state, closed and reopened midway, every table and
view equal to DuckDB's recomputation at the reopen and at the end. Ten epochs, not a few
dozen: with 10 views an epoch costs ≈1 s of CPU even over a few hundred rows (the
statements' floor), and the test is to stay well under 20 s."""

from __future__ import annotations

from pathlib import Path

from bench_soak import soak
from soak_workload import Scale

SMALL = Scale(customers=30, products=10, orders=200, quotes_per_epoch=4, live_quotes=30,
              batch_sizes=(6, 30, 90))


def test_a_short_soak_stays_exact_across_a_reopen(tmp_path: Path) -> None:
    result = soak(tmp_path / "state", epochs=10, reopen_every=5, scale=SMALL, seed=3,
                  fresh=False)
    assert [s.last_epoch for s in result.stretches] == [5, 10]
    assert all(s.rows > 0 for s in result.stretches)
