"""The ``ivm`` command line (a console script; also ``python -m ivm.views.cli``).

    ivm run pipeline.sql --state DIR [--cdc DIR]   tables and views from a SQL file, then
        [--serve PORT [--host HOST]]              every CDC file not applied yet, one epoch each;
                                                  with --serve, read-only SQL over Arrow Flight
                                                  meanwhile, and after it until stopped
    ivm sql DIR "SELECT …" [--limit N]            a read-only query over tables and views
    ivm show DIR VIEW [--limit N]                 a view's (or table's) rows
    ivm explain DIR VIEW [--analyze] [--format text|dot|svg] [--output FILE]
    ivm check DIR "SELECT …"                      can this view be maintained, at what state
    ivm status DIR                                epoch, tables, views, rows, state bytes, times
    ivm serve DIR [--port N]                      read-only SQL over Arrow Flight (views.serving)

Every command takes ``--spark MASTER`` (and ``run``, creating state, ``--partitions N``)
before its name to work on Spark-mode state: ``ivm --spark local[2] status DIR``.

Results print as tables (``rich``); loads show a progress bar on a terminal. An
``ivm.IvmError`` prints as ``ivm: error: …`` with exit status 1, never a traceback.
Serving (``run --serve``, ``serve``) stops at Ctrl-C or SIGTERM, the state closed (exit
status 0); an interrupt while an epoch applies rolls it back (exit status 130).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rich.text import Text

from ivm.errors import IvmError
from ivm.views import pipeline
from ivm.views.cli_render import console, render_status, render_table
from ivm.views.connecting import connect
from ivm.views.serving import Server
from ivm.views.session import Session


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = parser().parse_args(argv)
    try:
        args.command(args)
    except IvmError as error:
        text = " ".join(str(error).split())  # one line, whatever DuckDB's message held
        # The message as plain text: a name holding "[x]" is no markup.
        console(stderr=True).print(Text.assemble(("ivm: error: ", "bold red"), text),
                                   highlight=False, soft_wrap=True)
        return 1
    except KeyboardInterrupt:
        console(stderr=True).print("ivm: interrupted", highlight=False)
        return 130
    return 0


def read_file(path: Path) -> str:
    """The text of a file the command line names; IvmError if it cannot be read."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise IvmError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from None


def write_file(path: Path, data: str | bytes) -> None:
    """Write an output file the command line names; IvmError if it cannot be written."""
    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
    except OSError as error:
        raise IvmError(f"cannot write {path}: {error.strerror or error}") from None


def parser() -> argparse.ArgumentParser:
    """The command line's arguments."""
    top = argparse.ArgumentParser(prog="ivm", description=__doc__.split("\n\n")[0])
    top.add_argument("--spark", metavar="MASTER",
                     help="Spark mode: the Spark master (local[2], spark://host:7077, ...)")
    top.add_argument("--partitions", type=int,
                     help="Spark mode: partitions of new state (default: Spark's parallelism)")
    commands = top.add_subparsers(required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="create a pipeline and apply its CDC files")
    run.add_argument("sql", type=Path, help="the SQL file of its tables and views")
    run.add_argument("--state", type=Path, required=True, help="the state directory")
    run.add_argument("--cdc", type=Path, help="the folder of CDC files, one epoch each")
    run.add_argument("--serve", type=int, metavar="PORT",
                     help="also serve read-only SQL over Arrow Flight on PORT (0: a free "
                          "one) while the files apply, then until Ctrl-C or SIGTERM")
    run.add_argument("--host", default="127.0.0.1", help="the host --serve binds")
    run.set_defaults(command=run_pipeline)
    sql = commands.add_parser("sql", help="run a read-only query")
    sql.add_argument("state", type=Path)
    sql.add_argument("query")
    sql.add_argument("--limit", type=int, default=50, help="rows shown (default 50)")
    sql.set_defaults(command=run_sql)
    show = commands.add_parser("show", help="a view's or table's rows")
    show.add_argument("state", type=Path)
    show.add_argument("name")
    show.add_argument("--limit", type=int, default=50, help="rows shown (default 50)")
    show.set_defaults(command=show_rows)
    explain = commands.add_parser("explain", help="a view's incremental plan")
    explain.add_argument("state", type=Path)
    explain.add_argument("view")
    explain.add_argument("--analyze", action="store_true", help="with the last epoch's profile")
    explain.add_argument("--format", choices=("text", "dot", "svg", "png"), default="text")
    explain.add_argument("--output", type=Path, help="write the plan to this file")
    explain.set_defaults(command=explain_view)
    check = commands.add_parser("check", help="can a view be maintained, with what state")
    check.add_argument("state", type=Path)
    check.add_argument("query")
    check.set_defaults(command=check_view)
    serve = commands.add_parser("serve", help="serve read-only SQL over Arrow Flight")
    serve.add_argument("state", type=Path)
    serve.add_argument("--port", type=int, default=8815)
    serve.add_argument("--host", default="127.0.0.1")
    serve.set_defaults(command=serve_state)
    status = commands.add_parser("status", help="epoch, tables, views, rows, state, times")
    status.add_argument("state", type=Path)
    status.set_defaults(command=show_status)
    return top


@contextmanager
def session(args: argparse.Namespace, state: Path) -> Iterator[Session]:
    """A session on ``state``: embedded, or with ``--spark`` on a SparkSession of that
    master (``views.spark.cli_session``), closed (and its Spark stopped) at the end."""
    if args.spark is None:
        if args.partitions is not None:
            raise IvmError("--partitions applies to Spark mode: give --spark MASTER too")
        with connect(state) as db:
            yield db
        return
    from ivm.views.spark.cli_session import spark_for_cli  # imports pyspark

    with spark_for_cli(args.spark) as spark, connect(
        state, spark=spark, partitions=args.partitions
    ) as db:
        yield db


@contextmanager
def existing(args: argparse.Namespace) -> Iterator[Session]:
    """A session on the existing state ``args.state`` (a missing directory is an error,
    not new state)."""
    state = args.state
    if not (state / "ivm.duckdb").exists():
        raise IvmError(f"no ivm state at {state} (create it with: ivm run pipeline.sql "
                       f"--state {state})")
    with session(args, state) as db:
        yield db


def run_pipeline(args: argparse.Namespace) -> None:
    """``ivm run`` (with ``--serve``: serving meanwhile, then until stopped)."""
    out = console()
    script = read_file(args.sql)  # before the state is opened (or created) for it
    with stopped_by_sigterm(args.serve is not None), session(args, args.state) as db:
        done = pipeline.define(db, script)  # a long backfill draws its bar (views.progress)
        for line in done:
            out.print(line)
        server = None
        if args.serve is not None:
            server = db.serve(args.serve, args.host)
            out.print(f"serving {args.state} at {server.location}", highlight=False)
            sys.stdout.flush()  # a reader waiting for the location reads it now
        if args.cdc is not None:
            apply_cdc(db, args.cdc)
        if server is not None:
            out.print("serving until Ctrl-C or SIGTERM", highlight=False)
            sys.stdout.flush()
            serve_until_stopped(server)


def apply_cdc(db: Session, folder: Path) -> None:
    """``ivm run``'s CDC files, with a progress bar on a terminal and a line per epoch."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    out = console()
    files = pipeline.cdc_files(folder, list(db.tables))
    applied = skipped = 0
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   console=console(stderr=True), disable=not sys.stderr.isatty())
    with bar:
        task = bar.add_task("CDC files", total=len(files))

        def told(path: Path, table: str, what: str) -> None:
            bar.update(task, description=f"{what} {path.name} → {table}")

        for path, table, epoch, rows in pipeline.apply_files(db, files, folder, told):
            bar.advance(task)
            if epoch:
                applied += 1
                empty = "" if rows else " (no rows: an epoch without changes)"
                out.print(f"epoch {epoch}: {path.name} → {table}{empty}", highlight=False)
                sys.stdout.flush()
            else:
                skipped += 1
    out.print(f"{applied} file(s) applied, {skipped} applied before; epoch {db.epoch}")
    sys.stdout.flush()


@contextmanager
def stopped_by_sigterm(wanted: bool = True) -> Iterator[None]:
    """SIGTERM raising KeyboardInterrupt meanwhile (as Ctrl-C does), so a process serving
    is stopped with its state closed (main thread only; elsewhere signals are not ours)."""
    if not wanted or threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def serve_until_stopped(server: Server) -> None:
    """Serve until Ctrl-C or SIGTERM (a KeyboardInterrupt: ``stopped_by_sigterm``), then
    stop the server."""
    try:
        while True:
            # Short sleeps: a signal the server's thread receives (Flight's serving
            # handles SIGINT and SIGTERM, then passes them on) does not wake this thread,
            # so its Python handler runs at the next wake-up.
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    console().print("stopped serving", highlight=False)


def run_sql(args: argparse.Namespace) -> None:
    """``ivm sql``."""
    with existing(args) as db:
        render_table(db.sql(args.query), args.limit)


def show_rows(args: argparse.Namespace) -> None:
    """``ivm show``."""
    with existing(args) as db:
        render_table(db.read(args.name), args.limit, title=args.name)


def explain_view(args: argparse.Namespace) -> None:
    """``ivm explain``."""
    with existing(args) as db:
        if args.format == "text":
            plan: str | bytes = db.explain(args.view, analyze=args.analyze)
        else:
            plan = db.explain(args.view, analyze=args.analyze, format=args.format)
    if args.output is not None:
        write_file(args.output, plan)
    elif isinstance(plan, bytes):
        sys.stdout.buffer.write(plan)
    else:
        print(plan)


def check_view(args: argparse.Namespace) -> None:
    """``ivm check``: exit status 0 when maintained, 2 when refused."""
    with existing(args) as db:
        check = db.check(args.query)
    print(check)
    if not check:
        raise SystemExit(2)


def serve_state(args: argparse.Namespace) -> None:
    """``ivm serve``: until Ctrl-C or SIGTERM (readers: ``ivm.views.serving.Reader``)."""
    with stopped_by_sigterm(), existing(args) as db:
        server = db.serve(args.port, args.host)
        console().print(f"serving {args.state} at {server.location} (Ctrl-C stops)",
                        highlight=False)
        sys.stdout.flush()
        serve_until_stopped(server)


def show_status(args: argparse.Namespace) -> None:
    """``ivm status``."""
    with existing(args) as db:
        render_status(args.state, db.epoch, db.stats(), db._history())


if __name__ == "__main__":
    sys.exit(main())
