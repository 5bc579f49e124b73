"""TPC-H for the benchmark and the tests: schema, data, refresh batches, queries, oracle SQL.

``benchmarks/bench_tpch.py`` (SF1, timed) and ``tests/test_tpch.py`` (SF 0.01, exactness
in ``make test``) both import this module, so the two run the same workload:

* the eight tables with their primary keys (``ddl``), as ``tpchgen-cli`` types them;
* data from ``tpchgen-cli`` (``generate``), its ``string_view`` columns read back as plain
  strings (``read_tables``);
* refresh batches (``Refresh``): TPC-H's RF1 (new orders, 1–7 lineitems each) and RF2
  (deletes of live orders with all their lineitems), plus, when asked, updates of a few
  rows of ``part``, ``supplier``, ``customer`` and ``partsupp`` (non-key attributes that
  the queries filter, group or order on), all one weighted batch per table for one
  ``ingest``; ``apply`` applies a batch to plain DuckDB tables (the replica);
* the 22 queries of ``../shared/tpch/queries`` (``queries``) and, for a query with
  ``ORDER BY … LIMIT``, the SQL of the answer ivm gives (``tie_broken``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import sqlglot
from sqlglot import exp

QUERIES = Path(__file__).resolve().parent.parent.parent / "shared" / "tpch" / "queries"
"""The 22 queries as DuckDB's tpch extension writes them (``q01.sql`` … ``q22.sql``)."""

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

UPDATED = {
    "part": ("p_name", "p_brand", "p_type", "p_size", "p_container", "p_retailprice"),
    "supplier": ("s_nationkey", "s_acctbal", "s_comment"),
    "customer": ("c_nationkey", "c_phone", "c_acctbal", "c_mktsegment"),
    "partsupp": ("ps_availqty", "ps_supplycost"),
}
"""The columns an update changes, per table: non-key attributes the queries filter on
(Q2's ``p_size = 15``, Q3's segment, Q22's phone prefix and balance, Q11's and Q20's
stock…), group by (nations) or order by (Q2's ``s_acctbal``)."""

PROFILES = {
    "part": (
        ("p_brand", "p_container", "p_size", "p_type", "p_name"),
        (
            # Q17 (Brand#23, MED BOX), Q19's 2nd branch, Q14 (PROMO), Q16, Q9 / Q20 (name)
            ("Brand#23", "MED BOX", 3, "PROMO BRUSHED BRASS", "forest green antique blue khaki"),
            # Q19's 1st branch, Q8's type, Q16
            ("Brand#12", "SM CASE", 3, "ECONOMY ANODIZED STEEL", "green almond azure beige black"),
            # Q19's 3rd branch, Q2 (size 15, BRASS)
            ("Brand#34", "LG CASE", 15, "LARGE BRUSHED BRASS", "forest bisque black blue blush"),
            # excluded by Q16 (Brand#45, MEDIUM POLISHED)
            ("Brand#45", "JUMBO BOX", 15, "MEDIUM POLISHED TIN", "chiffon coral cream cyan dark"),
        ),
    ),
    # The nations the queries name: Q8's BRAZIL, Q20's CANADA, Q7's FRANCE and GERMANY
    # (Q11's too), Q21's SAUDI ARABIA; Q16 excludes suppliers with complaints.
    "supplier": (
        ("s_nationkey", "s_comment"),
        (
            (2, "furiously Customer pending Complaints sleep"),
            (3, "carefully final deposits detect slyly"),
            (6, "blithely Customer ironic Complaints wake"),
            (7, "quickly regular accounts boost"),
            (20, "even packages nag furiously"),
        ),
    ),
}
"""Rows that pass some queries' narrow filters, per table as (columns, values): half of
the updated rows take one of them, so rows enter those filters (at SF 0.01 no part has
Q17's brand and container, no BRAZIL supplier sells Q8's part type) as well as leave
them."""

# The spec's date constants (days since 1970-01-01) and value domains.
START_DATE = 8035  # 1992-01-01
CURRENT_DATE = 9298  # 1995-06-17
END_DATE = 10591  # 1998-12-31
PRIORITIES = np.array(["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"])
INSTRUCTIONS = np.array(["DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"])
MODES = np.array(["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"])


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


def decimal_from_cents(cents: np.ndarray, type_: pa.DataType) -> pa.Array:
    """A decimal128 array (scale 2) whose unscaled values are ``cents``."""
    low = cents.astype(np.int64)
    words = np.column_stack([low, np.where(low < 0, -1, 0).astype(np.int64)]).ravel()
    return pa.Array.from_buffers(type_, len(low), [None, pa.py_buffer(words.tobytes())])


def cents_of(column: pa.ChunkedArray) -> np.ndarray:
    """The unscaled values of a decimal128 column (which fit in 64 bits)."""
    array = column.combine_chunks()
    words = np.frombuffer(array.buffers()[1], dtype=np.int64, count=2 * (array.offset + len(array)))
    return words[2 * array.offset :: 2].copy()


def dates(days: np.ndarray) -> pa.Array:
    return pa.array(days.astype(np.int32)).cast(pa.date32())


# --- refresh batches -------------------------------------------------------------------


@dataclass
class Batch:
    """One refresh batch (a weighted Z-set per table) and the tables' live rows after it."""

    tables: dict[str, pa.Table]
    after: dict[str, pa.Table]


class Refresh:
    """TPC-H's refresh functions over the live orders and lineitems (vectorized), plus
    ``updates`` rows updated per batch in each table of ``UPDATED`` (none by default).

    A batch holds ``fraction`` of ORDERS' initial rows as new orders (RF1) and deletes as
    many live ones with their lineitems (RF2). An update replaces each column of
    ``UPDATED`` in a random row by the value of another random row, as a delete of the
    old row and an insert of the new one. The same seed gives the same batches.
    """

    def __init__(
        self, data: Mapping[str, pa.Table], seed: int = 7, fraction: float = 0.001, updates: int = 0
    ) -> None:
        self.rng = np.random.default_rng(seed)
        self.updates = updates
        self.live = {name: data[name] for name in ("orders", "lineitem")}
        if updates:
            self.live.update((name, data[name]) for name in UPDATED)
        self.size = max(1, round(fraction * data["orders"].num_rows))
        self.next_key = int(pc.max(data["orders"]["o_orderkey"]).as_py()) + 1
        partsupp = data["partsupp"]
        self.ps_part = partsupp["ps_partkey"].to_numpy()
        self.ps_supp = partsupp["ps_suppkey"].to_numpy()
        self.price = np.zeros(int(pc.max(data["part"]["p_partkey"]).as_py()) + 1, dtype=np.int64)
        self.reprice(data["part"])
        customers = data["customer"]["c_custkey"].to_numpy()
        self.customers = customers[customers % 3 != 0]  # the spec's customers with orders
        # Free text is drawn from the loaded rows (keeps LIKE filters' selectivity).
        self.order_comments = data["orders"]["o_comment"]
        self.line_comments = data["lineitem"]["l_comment"]
        self.clerks = data["orders"]["o_clerk"]

    def reprice(self, part: pa.Table) -> None:
        """Take parts' retail prices (new lineitems are priced from them)."""
        self.price[part["p_partkey"].to_numpy()] = cents_of(part["p_retailprice"])

    def sample(self, column: pa.ChunkedArray, n: int) -> pa.Array:
        return column.take(pa.array(self.rng.integers(0, len(column), n))).combine_chunks()

    def new_rows(self) -> tuple[pa.Table, pa.Table]:
        """RF1: ``size`` new orders with 1–7 lineitems each."""
        rng, n = self.rng, self.size
        keys = np.arange(self.next_key, self.next_key + n, dtype=np.int64)
        counts = rng.integers(1, 8, n)
        m = int(counts.sum())
        owner = np.repeat(np.arange(n), counts)
        starts = np.cumsum(counts) - counts
        order_date = rng.integers(START_DATE, END_DATE - 151 + 1, n)
        pick = rng.integers(0, len(self.ps_part), m)
        partkey, suppkey = self.ps_part[pick], self.ps_supp[pick]
        quantity = rng.integers(1, 51, m)
        extended = quantity * self.price[partkey]
        discount, tax = rng.integers(0, 11, m), rng.integers(0, 9, m)
        ship = order_date[owner] + rng.integers(1, 122, m)
        commit = order_date[owner] + rng.integers(30, 91, m)
        receipt = ship + rng.integers(1, 31, m)
        returnflag = np.where(receipt <= CURRENT_DATE, np.where(rng.random(m) < 0.5, "R", "A"), "N")
        linestatus = np.where(ship > CURRENT_DATE, "O", "F")
        finished = np.bincount(owner, weights=linestatus == "F", minlength=n)
        status = np.where(finished == counts, "F", np.where(finished == 0, "O", "P"))
        charge = np.add.reduceat(extended * (100 + tax) * (100 - discount), starts)
        orders_schema, lineitem_schema = self.live["orders"].schema, self.live["lineitem"].schema
        money = orders_schema.field("o_totalprice").type
        orders = pa.Table.from_arrays(
            [
                pa.array(keys),
                pa.array(rng.choice(self.customers, n)),
                pa.array(status),
                decimal_from_cents((charge + 5000) // 10000, money),
                dates(order_date),
                pa.array(PRIORITIES[rng.integers(0, len(PRIORITIES), n)]),
                self.sample(self.clerks, n),
                pa.array(np.zeros(n, dtype=np.int32)),
                self.sample(self.order_comments, n),
            ],
            schema=orders_schema,
        )
        lineitem = pa.Table.from_arrays(
            [
                pa.array(keys[owner]),
                pa.array(partkey),
                pa.array(suppkey),
                pa.array((np.arange(m) - starts[owner] + 1).astype(np.int32)),
                decimal_from_cents(quantity * 100, money),
                decimal_from_cents(extended, money),
                decimal_from_cents(discount, money),
                decimal_from_cents(tax, money),
                pa.array(returnflag),
                pa.array(linestatus),
                dates(ship),
                dates(commit),
                dates(receipt),
                pa.array(INSTRUCTIONS[rng.integers(0, len(INSTRUCTIONS), m)]),
                pa.array(MODES[rng.integers(0, len(MODES), m)]),
                self.sample(self.line_comments, m),
            ],
            schema=lineitem_schema,
        )
        return orders, lineitem

    def updated(self, name: str) -> tuple[pa.Table, pa.Table]:
        """``updates`` random rows of ``name`` with new values in ``UPDATED[name]``: another
        row's, or for half of the rows a ``PROFILES`` row's where the table has some.
        Returns (the weighted batch, the table after it, whose last rows are the new ones)."""
        table, n = self.live[name], self.updates
        # Half of them among the rows the last batch updated (the table's last n rows), so
        # rows that entered a filter leave it again.
        again = self.rng.choice(np.arange(table.num_rows - n, table.num_rows), n // 2, False)
        others = self.rng.choice(table.num_rows - n, n - n // 2, replace=False)
        picked = np.concatenate([again, others])
        old = table.take(pa.array(picked))
        columns = {
            f.name: self.sample(table[f.name], n) if f.name in UPDATED[name] else old[f.name]
            for f in table.schema
        }
        if name in PROFILES:
            names, profiles = PROFILES[name]
            chosen = self.rng.integers(0, len(profiles), n)
            use = pa.array(self.rng.random(n) < 0.5)
            for i, column in enumerate(names):
                values = np.array([p[i] for p in profiles])[chosen]
                wanted = pa.array(values, type=table.schema.field(column).type)
                columns[column] = pc.if_else(use, wanted, columns[column])
        new = pa.Table.from_arrays(list(columns.values()), schema=table.schema)
        keep = np.ones(table.num_rows, dtype=bool)
        keep[picked] = False
        return weighted(old, new), pa.concat_tables([table.filter(pa.array(keep)), new])

    def next(self) -> Batch:
        """RF1 + RF2 (and the updates) as one weighted batch; nothing changes until ``commit``."""
        orders, lineitem = self.live["orders"], self.live["lineitem"]
        new_orders, new_lines = self.new_rows()
        picked = self.rng.choice(orders.num_rows, self.size, replace=False)
        old_orders = orders.take(pa.array(picked))
        keep = np.ones(orders.num_rows, dtype=bool)
        keep[picked] = False
        gone = pc.is_in(lineitem["l_orderkey"], value_set=old_orders["o_orderkey"].combine_chunks())
        batch = Batch(
            tables={
                "orders": weighted(old_orders, new_orders),
                "lineitem": weighted(lineitem.filter(gone), new_lines),
            },
            after={
                "orders": pa.concat_tables([orders.filter(pa.array(keep)), new_orders]),
                "lineitem": pa.concat_tables([lineitem.filter(pc.invert(gone)), new_lines]),
            },
        )
        if self.updates:
            for name in UPDATED:
                batch.tables[name], batch.after[name] = self.updated(name)
        return batch

    def commit(self, batch: Batch) -> None:
        """The batch was applied: later batches start from its rows."""
        self.live.update(batch.after)
        self.next_key += self.size
        if "part" in batch.after:
            self.reprice(batch.after["part"])


def weighted(deleted: pa.Table, inserted: pa.Table) -> pa.Table:
    """A Z-set: ``deleted`` with weight −1, ``inserted`` with +1."""
    minus = deleted.append_column("__w", pa.array(np.full(deleted.num_rows, -1, dtype=np.int64)))
    plus = inserted.append_column("__w", pa.array(np.ones(inserted.num_rows, dtype=np.int64)))
    return pa.concat_tables([minus, plus]).combine_chunks()


def apply(con: duckdb.DuckDBPyConnection, tables: Mapping[str, pa.Table]) -> None:
    """Apply weighted batches to plain DuckDB tables of the same names: each table's
    deleted rows by primary key, then its inserted rows."""
    for name, batch in tables.items():
        match = " AND ".join(f"b.{k} = {name}.{k}" for k in KEYS[name])
        con.register("__batch", batch)
        try:
            con.execute(
                f"DELETE FROM {name} WHERE EXISTS "
                f"(SELECT 1 FROM __batch AS b WHERE b.__w < 0 AND {match})"
            )
            con.execute(
                f"INSERT INTO {name} BY NAME SELECT * EXCLUDE (__w) FROM __batch WHERE __w > 0"
            )
        finally:
            con.unregister("__batch")


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
