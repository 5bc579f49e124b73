"""TPC-H for the benchmark and the tests: schema, data, queries, oracle SQL.

``benchmarks/bench_tpch.py`` (SF1, timed) and ``tests/test_tpch.py`` (SF 0.01, exactness
in ``make test``) both import this module and ``tpch_refresh`` (the refresh batches), so
the two run the same workload:

* the eight tables with their primary keys (``ddl``), as ``tpchgen-cli`` types them;
* data from ``tpchgen-cli`` (``generate``), its ``string_view`` columns read back as plain
  strings (``read_tables``);
* the 22 queries of ``benchmarks/tpch_queries`` (copied from ``../shared/tpch/queries``:
  ``queries``) and, for a query with
  ``ORDER BY … LIMIT``, the SQL of the answer ivm gives (``tie_broken``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import sqlglot
from sqlglot import exp

QUERIES = Path(__file__).resolve().parent / "tpch_queries"
"""The 22 queries as DuckDB's tpch extension writes them (``q01.sql`` … ``q22.sql``), copied
from ``../shared/tpch/queries`` so that a clone anywhere (CI's) has them."""

# The TPC-H schema with the column types tpchgen-cli writes (int32 columns as INTEGER).
COLUMNS = {
    "region": "r_regionkey BIGINT, r_name VARCHAR, r_comment VARCHAR",
    "nation": "n_nationkey BIGINT, n_name VARCHAR, n_regionkey BIGINT, n_comment VARCHAR",
    "part": (
        "p_partkey BIGINT, p_name VARCHAR, p_mfgr VARCHAR, p_brand VARCHAR, p_type VARCHAR, "
        "p_size INTEGER, p_container VARCHAR, p_retailprice DECIMAL(15,2), p_comment VARCHAR"
    ),
    "supplier": (
        "s_suppkey BIGINT, s_name VARCHAR, s_address VARCHAR, s_nationkey BIGINT, "
        "s_phone VARCHAR, s_acctbal DECIMAL(15,2), s_comment VARCHAR"
    ),
    "partsupp": (
        "ps_partkey BIGINT, ps_suppkey BIGINT, ps_availqty INTEGER, "
        "ps_supplycost DECIMAL(15,2), ps_comment VARCHAR"
    ),
    "customer": (
        "c_custkey BIGINT, c_name VARCHAR, c_address VARCHAR, c_nationkey BIGINT, "
        "c_phone VARCHAR, c_acctbal DECIMAL(15,2), c_mktsegment VARCHAR, c_comment VARCHAR"
    ),
    "orders": (
        "o_orderkey BIGINT, o_custkey BIGINT, o_orderstatus VARCHAR, "
        "o_totalprice DECIMAL(15,2), o_orderdate DATE, o_orderpriority VARCHAR, "
        "o_clerk VARCHAR, o_shippriority INTEGER, o_comment VARCHAR"
    ),
    "lineitem": (
        "l_orderkey BIGINT, l_partkey BIGINT, l_suppkey BIGINT, l_linenumber INTEGER, "
        "l_quantity DECIMAL(15,2), l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), "
        "l_tax DECIMAL(15,2), l_returnflag VARCHAR, l_linestatus VARCHAR, l_shipdate DATE, "
        "l_commitdate DATE, l_receiptdate DATE, l_shipinstruct VARCHAR, l_shipmode VARCHAR, "
        "l_comment VARCHAR"
    ),
}
KEYS = {
    "region": ("r_regionkey",),
    "nation": ("n_nationkey",),
    "part": ("p_partkey",),
    "supplier": ("s_suppkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "customer": ("c_custkey",),
    "orders": ("o_orderkey",),
    "lineitem": ("l_orderkey", "l_linenumber"),
}
SMALL_TABLES = ("region", "nation", "part", "supplier", "partsupp", "customer")


def ddl(lineitem_key: bool = True, only: Iterable[str] = COLUMNS) -> str:
    """The CREATE TABLE statements (of the tables ``only`` names), each with its primary
    key (lineitem's optional)."""
    statements = []
    for name in COLUMNS:
        if name in only:
            key = f", PRIMARY KEY ({', '.join(KEYS[name])})"
            key = key if name != "lineitem" or lineitem_key else ""
            statements.append(f"CREATE TABLE {name} ({COLUMNS[name]}{key});")
    return "\n".join(statements)


# --- data ------------------------------------------------------------------------------


def generate(sf: float, target: Path) -> bool:
    """Make ``target`` hold TPC-H at scale factor ``sf`` (tpchgen-cli's Parquet files).

    Returns whether it generated (False: every file was there already). Files are written
    aside and renamed, so a cut-short run never leaves a folder that looks complete.
    """
    if all((target / f"{t}.parquet").exists() for t in COLUMNS):
        return False
    tool = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    if not Path(tool).exists():
        raise FileNotFoundError("tpchgen-cli not found: pip install tpchgen-cli")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=f"{target.name}-partial-"))
    try:
        subprocess.run(
            [tool, "parquet", "-s", f"{sf:g}", "--output-dir", scratch],
            check=True,
            capture_output=True,
        )
        shutil.rmtree(target, ignore_errors=True)
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return True


def schemas() -> dict[str, pa.Schema]:
    """Each table's Arrow schema, as DuckDB (and so ivm) types the DDL's columns."""
    con = duckdb.connect()
    try:
        con.execute(ddl())
        return {t: con.sql(f"SELECT * FROM {t} LIMIT 0").to_arrow_table().schema for t in COLUMNS}
    finally:
        con.close()


def read_tables(folder: Path) -> dict[str, pa.Table]:
    """The eight tables of ``folder`` (from ``generate``), typed as the DDL says."""
    return {
        name: conform(pq.read_table(folder / f"{name}.parquet"), schema, name)
        for name, schema in schemas().items()
    }


def conform(table: pa.Table, schema: pa.Schema, name: str) -> pa.Table:
    """``table`` with string_view columns as plain strings, checked against the DDL's types."""
    if table.num_columns != len(schema):
        raise ValueError(f"{name}: data has columns {table.column_names}, the DDL {schema.names}")
    columns = []
    for target in schema:
        column = table[target.name]
        if pa.types.is_string_view(column.type):
            column = pc.cast(column, pa.string())
        if column.type != target.type:
            raise ValueError(
                f"{name}.{target.name}: data has {column.type}, the DDL says {target.type}"
            )
        columns.append(column.combine_chunks())
    return pa.Table.from_arrays(columns, schema=schema)


# --- queries ---------------------------------------------------------------------------


def queries(folder: Path = QUERIES) -> dict[str, str]:
    """``{"q01": sql, …}``: every ``q*.sql`` of ``folder``, without its final semicolon."""
    return {
        path.stem.lower(): path.read_text().strip().rstrip(";").rstrip()
        for path in sorted(folder.glob("q*.sql"))
    }


def tables_of(sql: str) -> set[str]:
    """The TPC-H tables ``sql`` reads."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    return {t.name.lower() for t in tree.find_all(exp.Table)} & set(COLUMNS)


def tie_broken(sql: str) -> str:
    """The SQL of ivm's answer to ``sql``: with a LIMIT, DuckDB breaks ties at the limit
    as it happens to; ivm breaks them by the output columns in SELECT-list order,
    ascending, NULLS LAST, after the ORDER BY keys. So a query with a LIMIT gets its
    output positions appended to its outermost ORDER BY (``ORDER BY <keys>, 1, 2, …, n``);
    any other query is returned as it is.
    """
    tree = sqlglot.parse_one(sql, read="duckdb")
    if not tree.args.get("limit"):
        return sql
    selects = tree.selects
    if any(isinstance(s, exp.Star) or isinstance(s.unalias(), exp.Star) for s in selects):
        raise ValueError("tie_broken needs the output columns spelled out, not *")
    positions = [
        exp.Ordered(this=exp.Literal.number(i), desc=False, nulls_first=False)
        for i in range(1, len(selects) + 1)
    ]
    order = tree.args.get("order")
    keys = order.expressions if order else []
    tree.set("order", exp.Order(expressions=[*keys, *positions]))
    return tree.sql(dialect="duckdb", pretty=True)
