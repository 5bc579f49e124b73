"""Run sqllogictest scripts' SELECTs as views maintained through CDC; ``make test-slt``.

For each script, its statements run in a scratch DuckDB in order (CREATE TABLE,
INSERT, DELETE, CREATE VIEW…; CREATE INDEX is DuckDB's business only). Each query
runs against the tables as the statements before it left them: DuckDB runs it first
(a query DuckDB rejects is discarded, not counted); then the query becomes a view of
an ivm session whose tables are created *empty* (with the script's own views), and
the tables' rows arrive as CDC batches: three epochs of inserts (every table's rows in
three shuffled parts), four epochs of random deletes, re-inserts, updates and
duplicates, and a last one restoring the script's data. Every epoch is compared with
DuckDB (``fuzz.driver``: contents, names, types, deltas, the plan as plain SQL).
Queries over the same tables run ``GROUP`` at a time in one session.

    python tests/slt/runner.py [script…] [--every n] [--minutes m] [--report path]

prints the tally per script and overall with rich, and writes every wrong, internal or
too slow case to the report with the epochs that led to it.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path[:0] = [str(Path(__file__).resolve().parents[1]),
                    str(Path(__file__).resolve().parents[2])]

import duckdb
from fuzz.driver import FAILURES, Drive, Outcome, Result, TooSlow, time_limit
from oracle.harness import FORMATS, Epoch, Row, TableChange, table_specs

from slt.parser import parse, read_text

CORPUS = Path(__file__).resolve().parent / "corpus"
GROUP = 20
NO_TABLE = "slt_no_table"
EPOCHS = 8


@dataclass
class State:
    """The tables (DDL and rows) and script views as some statements left them, and the
    queries run against them."""

    tables: dict[str, str]
    rows: dict[str, list[Row]]
    views: list[str]
    queries: list[tuple[int, str]] = field(default_factory=list)
    """(line, SQL)."""


@dataclass
class ScriptRun:
    script: str
    results: list[Result] = field(default_factory=list)
    rejected: int = 0
    """Queries DuckDB rejects (discarded)."""


_CREATE = re.compile(r"^\s*CREATE\s+(?:UNIQUE\s+)?(TABLE|VIEW|INDEX)\s+(\w+)", re.I)
_DROP = re.compile(r"^\s*DROP\s+(TABLE|VIEW|INDEX)\s+(?:IF\s+EXISTS\s+)?(\w+)", re.I)


def states(text: str, every: int = 1, hard: float = 30.0) -> Iterator[tuple[State, int]]:
    """The script's states, each with its every ``every``-th query that DuckDB accepts
    (within ``hard`` seconds), and how many of those it rejected."""
    scratch = duckdb.connect()
    tables: dict[str, str] = {}
    views: dict[str, str] = {}
    current: State | None = None
    rejected = counter = 0
    try:
        for record in parse(text):
            if not record.runs_on():
                continue
            if record.kind == "statement":
                try:
                    scratch.execute(record.sql)
                except duckdb.Error:
                    continue
                if current is not None and current.queries:
                    yield current, rejected
                    rejected = 0
                current = None
                if m := _CREATE.match(record.sql):
                    kind, name = m.group(1).upper(), m.group(2)
                    if kind == "TABLE":  # UNIQUE changes no query: ivm takes keys only
                        tables[name] = re.sub(r"\bUNIQUE\b", "", record.sql, flags=re.I)
                    elif kind == "VIEW":
                        views[name] = record.sql
                elif m := _DROP.match(record.sql):
                    (tables if m.group(1).upper() == "TABLE" else views).pop(m.group(2), None)
                continue
            counter += 1
            if (counter - 1) % every:
                continue
            try:
                with time_limit(hard):
                    scratch.execute(record.sql).fetchall()
            except (duckdb.Error, TooSlow, RuntimeError):
                rejected += 1
                continue
            if current is None:
                rows = {t: [tuple(r) for r in scratch.execute(
                    f'SELECT * FROM "{t}" ORDER BY rowid').fetchall()] for t in tables}
                current = State(dict(tables), rows, list(views.values()))
            current.queries.append((record.line, record.sql))
        if current is not None and current.queries or rejected:
            yield current or State({}, {}, []), rejected
    finally:
        scratch.close()


def cdc_epochs(state: State, tables: Sequence[str], rng: random.Random) -> list[Epoch]:
    """Three epochs of inserts, four of random changes, one restoring the data."""
    specs = table_specs([state.tables[t] for t in tables])
    live = {t: [] for t in tables}
    out: list[list[tuple[str, list]]] = []
    parts = {t: [list(state.rows[t][i::3]) for i in range(3)] for t in tables}
    for part in parts.values():
        for chunk in part:
            rng.shuffle(chunk)
    for i in range(3):
        out.append([(t, [("insert", r) for r in parts[t][i]]) for t in tables])
        for t in tables:
            live[t] += parts[t][i]
    for _ in range(4):
        epoch = []
        for t in rng.sample(list(tables), rng.randint(1, len(tables))):
            ops, rows, spec = [], live[t], specs[t]
            taken = {spec.key(r) for r in rows} if spec.primary_key else set()
            gone = [r for r in state.rows[t] if rows.count(r) < state.rows[t].count(r)
                    and (not spec.primary_key or spec.key(r) not in taken)]
            for r in rng.sample(gone, min(len(gone), rng.randint(0, 3))):
                ops.append(("insert", r))
                rows.append(r)
            for _ in range(rng.randint(0, max(1, len(rows) // 3))):
                if rows:
                    ops.append(("delete", rows.pop(rng.randrange(len(rows)))))
            free = [i for i, c in enumerate(specs[t].columns)
                    if c.name not in specs[t].primary_key]
            if rows and free and rng.random() < 0.5:
                old = rows.pop(rng.randrange(len(rows)))
                j = rng.choice(free)
                new = (*old[:j], rng.choice(state.rows[t])[j], *old[j + 1:])
                if new not in rows and new not in state.rows[t]:
                    ops.append(("update", old, new))
                    rows.append(new)
                else:
                    rows.append(old)
            epoch.append((t, ops))
        out.append(epoch)
    last = []
    for t in tables:
        want = Counter(state.rows[t])
        have = Counter(live[t])
        ops = [("delete", r) for r in (have - want).elements()]
        ops += [("insert", r) for r in (want - have).elements()]
        last.append((t, ops))
    out.append(last)
    return [Epoch(tuple(TableChange(t, tuple(ops), rng.choice(FORMATS), rng.randrange(1000))
                        for t, ops in epoch)) for epoch in out]


def referenced(state: State, sql: str) -> list[str]:
    """The state's tables a query (or the script views it reads) names."""
    text = " ".join([sql, *state.views]).lower()
    return [t for t in state.tables if re.search(rf"\b{re.escape(t.lower())}\b", text)]


def run_script(path: Path, every: int = 1, slow: float = 5.0, seed: int = 0,
               deadline: float | None = None) -> ScriptRun:
    """Every ``every``-th query of the script, until ``deadline`` (a monotonic time)."""
    run = ScriptRun(path.name)
    for state, rejected in states(read_text(path), every):
        if deadline is not None and time.monotonic() > deadline:
            return run
        run.rejected += rejected
        chosen = state.queries
        for start in range(0, len(chosen), GROUP):
            if deadline is not None and time.monotonic() > deadline:
                return run
            group = chosen[start:start + GROUP]
            tables = sorted({t for _, sql in group for t in referenced(state, sql)})
            if not tables:  # queries of constants: some table must take the epochs
                state = State({**state.tables, NO_TABLE: f"CREATE TABLE {NO_TABLE} (x INTEGER)"},
                              {**state.rows, NO_TABLE: [(1,), (2,), (3,)]}, state.views)
                tables = [NO_TABLE]
            rng = random.Random(f"{path.name}:{seed}:{group[0][0]}")
            epochs = cdc_epochs(state, tables, rng)
            ddl = [state.tables[t] for t in tables] + state.views
            queries = {f"line {line}": sql for line, sql in group}
            results = Drive(ddl, queries, lambda _h, i, e=epochs: e[i], len(epochs),
                            slow=slow, oracle_ddl=state.views).run()
            run.results += results.values()
    return run


def write_report(path: Path, runs: list[ScriptRun]) -> None:
    lines = []
    for run in runs:
        for r in run.results:
            if r.outcome not in FAILURES:
                continue
            lines += [f"=== {run.script} {r.name}: {r.outcome} (epoch {r.epoch}, "
                      f"{r.seconds:.2f} s)", r.sql, "--- detail", r.detail, "--- epochs"]
            lines += [repr(e) for e in r.history]
            lines.append("")
    path.write_text("\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", type=Path,
                        help="scripts (default: every file of tests/slt/corpus)")
    parser.add_argument("--every", type=int, default=1, help="run every n-th query")
    parser.add_argument("--minutes", type=float, default=None,
                        help="time budget per script")
    parser.add_argument("--report", type=Path, default=Path("slt-report.txt"))
    args = parser.parse_args(argv)
    scripts = args.scripts or sorted(CORPUS.glob("*.test.gz"))
    console = Console(width=200)
    table = Table(title="sqllogictest queries as maintained views")
    table.add_column("script")
    for outcome in Outcome:
        table.add_column(str(outcome), justify="right")
    table.add_column("rejected by DuckDB", justify="right")
    table.add_column("seconds", justify="right")
    runs, total = [], Counter()
    for script in scripts:
        began = time.monotonic()
        deadline = began + args.minutes * 60 if args.minutes else None
        try:
            run = run_script(script, args.every, deadline=deadline)
        except Exception as error:  # noqa: BLE001 - a runner bug: say so, run the next one
            console.print(f"[red]{script.name}: the runner failed: {error!r}[/red]")
            run = ScriptRun(script.name)
        runs.append(run)
        tally = Counter(r.outcome for r in run.results)
        total.update(tally)
        total["rejected"] += run.rejected
        row = (run.script, *(str(tally[o]) for o in Outcome), str(run.rejected),
               f"{time.monotonic() - began:.0f}")
        table.add_row(*row)
        console.print(" | ".join(row))
        for r in run.results:
            if r.outcome in FAILURES:
                console.print(f"[red]{run.script} {r.name}: {r.outcome}[/red] "
                              f"{r.detail.splitlines()[0][:160] if r.detail else ''}")
        write_report(args.report, runs)
    table.add_row("all", *(str(total[o]) for o in Outcome), str(total["rejected"]), "")
    console.print(table)
    failures = sum(total[o] for o in FAILURES)
    if failures:
        console.print(f"{failures} failures written to {args.report}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
