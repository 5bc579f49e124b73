"""TPC-DS data and queries for the benchmarks, generated offline and reproducibly.

DuckDB's ``tpcds`` extension is not downloadable for the duckdb this project uses,
but PyPI ships it for duckdb 1.5.5 as ``duckdb-extension-tpcds``. This script makes
a throwaway virtual environment OUTSIDE the repository (``--venv``, by default
``~/.cache/ivm/tpcds-venv``) with ``duckdb==1.5.5 duckdb-extension-tpcds``, and runs
itself there to call ``dsdgen(sf=…, keys=true)`` and ``tpcds_queries()``. It writes
(git-ignored) under ``benchmarks/.data/tpcds/sf<SF>/``:

* ``tables/<name>.parquet``: the 24 tables;
* ``schema.sql``: their ``CREATE TABLE`` statements with TPC-DS's primary keys;
* ``queries/qNN.sql``: the 99 queries as DuckDB writes them (``q01.sql`` … ``q99.sql``);
* ``DONE``: written last, so a half-written folder is regenerated.

    python benchmarks/tpcds_data.py [--sf 0.01] [--venv DIR] [--force]

``folder(sf)`` returns the data folder, generating it when missing; the
benchmarks import it (``from tpcds_data import folder``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA_ROOT = HERE / ".data" / "tpcds"
DEFAULT_VENV = Path.home() / ".cache" / "ivm" / "tpcds-venv"
DUCKDB_VERSION = "1.5.5"
REQUIREMENTS = (f"duckdb=={DUCKDB_VERSION}", f"duckdb-extension-tpcds=={DUCKDB_VERSION}")


def target(sf: float) -> Path:
    """The data folder of scale factor ``sf`` (it may not exist yet)."""
    return DATA_ROOT / f"sf{sf:g}"


def folder(sf: float = 0.01, venv_dir: Path = DEFAULT_VENV, force: bool = False) -> Path:
    """The data folder of scale factor ``sf``, generated first when missing or ``force``."""
    out = target(sf)
    if force or not (out / "DONE").exists():
        python = side_venv(venv_dir)
        if out.exists():
            shutil.rmtree(out)
        subprocess.run([str(python), __file__, "--inside", "--sf", repr(sf)], check=True)
    return out


def side_venv(venv_dir: Path) -> Path:
    """The python of the side environment holding duckdb 1.5.5 and its tpcds extension."""
    python = venv_dir / "bin" / "python"
    probe = [str(python), "-c", "import duckdb, duckdb_extension_tpcds; print(duckdb.__version__)"]
    if python.exists():
        done = subprocess.run(probe, capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == DUCKDB_VERSION:
            return python
    venv.create(venv_dir, with_pip=True, clear=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *REQUIREMENTS], check=True)
    return python


def extension_path() -> str:
    """The tpcds extension file shipped inside the ``duckdb_extension_tpcds`` package."""
    import duckdb_extension_tpcds  # only importable inside the side environment

    root = Path(duckdb_extension_tpcds.__file__).parent / "extensions"
    found = sorted(root.glob("*/tpcds.duckdb_extension"))
    if not found:
        raise FileNotFoundError(f"no tpcds.duckdb_extension under {root}")
    return str(found[-1])


def generate(sf: float) -> None:
    """Inside the side environment: write tables, schema and queries of ``sf``."""
    import duckdb  # duckdb 1.5.5 here, not the project's

    out = target(sf)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    (out / "queries").mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute(f"LOAD '{extension_path()}'")
    con.execute(f"CALL dsdgen(sf={sf!r}, keys=true)")
    names = [row[0] for row in con.sql(
        "SELECT table_name FROM duckdb_tables() ORDER BY table_name").fetchall()]
    statements = []
    for name in names:
        statements.append(con.sql(
            f"SELECT sql FROM duckdb_tables() WHERE table_name = '{name}'").fetchone()[0])
        con.execute(f"COPY (SELECT * FROM \"{name}\") TO '{out / 'tables' / name}.parquet' "
                    "(FORMAT parquet)")
    (out / "schema.sql").write_text("\n".join(statements) + "\n")
    for number, query in con.sql("SELECT query_nr, query FROM tpcds_queries()").fetchall():
        (out / "queries" / f"q{number:02d}.sql").write_text(query.strip() + "\n")
    (out / "DONE").write_text(f"duckdb {duckdb.__version__} dsdgen(sf={sf!r}, keys=true)\n")


def main() -> None:
    """Command line: generate (or regenerate with ``--force``) the data of ``--sf``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=0.01)
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV,
                        help="the side environment (outside the repository)")
    parser.add_argument("--force", action="store_true", help="regenerate even when present")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        generate(args.sf)
        return
    out = folder(args.sf, args.venv.expanduser(), args.force)
    tables = len(list((out / "tables").glob("*.parquet")))
    queries = len(list((out / "queries").glob("q*.sql")))
    print(f"{out}: {tables} tables, {queries} queries", file=sys.stderr)


if __name__ == "__main__":
    main()
