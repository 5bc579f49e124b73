"""Run fuzzer seeds in groups and tally how their queries ended; ``make fuzz N=…``.

Each seed gives one query (``generator.valid_query``: the first draw DuckDB accepts).
Queries run ``GROUP`` at a time as views of one session, through random CDC epochs
drawn by the oracle harness's hypothesis strategy, seeded by the group's first seed:
a run is deterministic per seed list. ``python tests/fuzz/campaign.py --n 500`` (or
``--minutes 10``) starts at a seed drawn from the clock unless ``--start`` is given,
prints the tally with rich, and writes every failure (query, outcome, detail, the
epochs that led to it) to ``--report`` (default ``fuzz-report.txt``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the tests folder on the path
    sys.path[:0] = [str(Path(__file__).resolve().parents[1]),
                    str(Path(__file__).resolve().parents[2])]

from hypothesis import HealthCheck, Phase, assume, given, seed, settings
from hypothesis import strategies as st

from fuzz.driver import FAILURES, Drive, Outcome, Result
from fuzz.generator import DDL, schema_connection, valid_query

GROUP = 8
"""Queries per session: one session's epochs check all of them."""
EPOCHS = 8
"""Epochs per group after the views exist."""
WARMUP = 2
"""Epochs filling the tables before the views exist (their creation reads them)."""
MAX_OPS = 8
"""Changes per table and epoch, at most."""


def run_seeds(seeds: Sequence[int], epochs: int = EPOCHS, slow: float = 5.0
              ) -> tuple[list[Result], int]:
    """The results of ``seeds``' queries run as one group, and how many drawn queries
    DuckDB rejected on the way (discarded, never run)."""
    check = schema_connection()
    queries, rejected = {}, 0
    for s in seeds:
        sql, r = valid_query(s, check)
        queries[f"seed {s}"] = sql
        rejected += r
    check.close()
    results: dict[str, Result] = {}

    @settings(max_examples=1, deadline=None, database=None, derandomize=False,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
    @seed(seeds[0])
    @given(data=st.data())
    def group(data: st.DataObject) -> None:
        # Hypothesis's first example is the minimal one (every draw 0, every epoch one
        # insert of the same row): reject it, so the example run is a random one.
        assume(data.draw(st.booleans(), label="not the minimal example"))

        def source(harness, i):  # noqa: ANN001, ANN202
            return data.draw(harness.strategy(max_ops=MAX_OPS), label=f"epoch {i}")

        results.update(Drive(DDL, queries, source, epochs, warmup=WARMUP, slow=slow).run())

    group()
    return [results[f"seed {s}"] for s in seeds], rejected


def campaign(start: int, n: int | None, minutes: float | None,
             progress: Callable[[list[Result]], None] | None = None
             ) -> tuple[list[Result], int, float]:
    """Groups of seeds from ``start`` until ``n`` queries ran or ``minutes`` passed."""
    results: list[Result] = []
    rejected = 0
    began = time.monotonic()
    next_seed = start
    while True:
        if n is not None and len(results) >= n:
            break
        if minutes is not None and time.monotonic() - began > minutes * 60:
            break
        size = GROUP if n is None else min(GROUP, n - len(results))
        group, r = run_seeds(range(next_seed, next_seed + size))
        next_seed += size
        results += group
        rejected += r
        if progress:
            progress(group)
    return results, rejected, time.monotonic() - began


def write_report(path: Path, results: list[Result]) -> None:
    lines = []
    for r in results:
        if r.outcome not in FAILURES:
            continue
        lines += [f"=== {r.name}: {r.outcome} (epoch {r.epoch}, {r.seconds:.2f} s)", r.sql,
                  "--- detail", r.detail, "--- epochs"]
        lines += [repr(e) for e in r.history]
        lines.append("")
    path.write_text("\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=None, help="queries to run")
    parser.add_argument("--minutes", type=float, default=None, help="or: run this long")
    parser.add_argument("--start", type=int, default=None, help="first seed (default: clock)")
    parser.add_argument("--report", type=Path, default=Path("fuzz-report.txt"))
    args = parser.parse_args(argv)
    if args.n is None and args.minutes is None:
        args.n = 200
    start = args.start if args.start is not None else int(time.time()) % 10_000_000 * 1000
    console = Console(width=200)
    console.print(f"fuzzing from seed {start}: "
                  f"{args.n or '∞'} queries, {args.minutes or '∞'} minutes")

    def progress(group: list[Result]) -> None:
        for r in group:
            if r.outcome in FAILURES:
                console.print(f"[red]{r.name}: {r.outcome}[/red] {r.detail.splitlines()[0][:160]}")

    results, rejected, seconds = campaign(start, args.n, args.minutes, progress)
    tally = Counter(r.outcome for r in results)
    table = Table(title=f"{len(results)} queries in {seconds:.0f} s (seeds {start}…"
                        f"{start + len(results) - 1}; {rejected} drafts rejected by DuckDB)")
    table.add_column("outcome")
    table.add_column("queries", justify="right")
    for outcome in Outcome:
        table.add_row(str(outcome), str(tally[outcome]))
    console.print(table)
    held = sum(1 for r in results if r.outcome == Outcome.EXACT and r.rows)
    console.print(f"{held} of the {tally[Outcome.EXACT]} exact views held rows after some epoch")
    write_report(args.report, results)
    failures = sum(tally[o] for o in FAILURES)
    if failures:
        console.print(f"{failures} failures written to {args.report}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
