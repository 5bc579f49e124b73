"""TPC-H's refresh batches, for the benchmark and the tests (with ``tpch_workload``).

``Refresh`` makes TPC-H's RF1 (new orders, 1–7 lineitems each) and RF2 (deletes of live
orders with all their lineitems) and, when asked, updates of a few rows of ``part``,
``supplier``, ``customer`` and ``partsupp`` (non-key attributes that the queries filter,
group or order on): one weighted batch (a Z-set with ``__w``) per table, for one
``ingest``. ``apply`` applies such batches to plain DuckDB tables (a replica).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tpch_workload import KEYS

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

    def next(self, also_delete: Sequence[int] = ()) -> Batch:
        """RF1 + RF2 (and the updates) as one weighted batch; nothing changes until ``commit``.
        ``also_delete``: order keys RF2 deletes besides its random picks (when live)."""
        orders, lineitem = self.live["orders"], self.live["lineitem"]
        new_orders, new_lines = self.new_rows()
        picked = self.rng.choice(orders.num_rows, self.size, replace=False)
        if also_delete:
            wanted = pc.is_in(orders["o_orderkey"], value_set=pa.array(list(also_delete)))
            picked = np.union1d(picked, np.flatnonzero(wanted.to_numpy(zero_copy_only=False)))
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


class ReplicaRefresh(Refresh):
    """``Refresh`` whose live orders and lineitems are the tables of a DuckDB replica, for
    scales whose tables do not fit in memory as Arrow (SF 10: 75M rows). It keeps only the
    live order keys, the partsupp pairs, the parts' prices, the customers and samples of
    the free-text columns; RF2 reads the picked orders and their lineitems from ``con``,
    which must hold the live rows whenever ``next`` is called (the benchmark applies each
    batch to it after ``ingest``). No updates of the other tables."""

    TEXT_SAMPLE = 200_000
    """Rows of each free-text column new rows draw from."""

    def __init__(self, con: duckdb.DuckDBPyConnection, schemas: Mapping[str, pa.Schema],
                 seed: int = 7, fraction: float = 0.001) -> None:
        self.con = con
        self.rng = np.random.default_rng(seed)
        self.updates = 0
        self.live = {name: schemas[name].empty_table() for name in ("orders", "lineitem")}
        self.keys = self._column("SELECT o_orderkey FROM orders").to_numpy()
        self.size = max(1, round(fraction * len(self.keys)))
        self.next_key = int(self.keys.max()) + 1
        self.ps_part = self._column("SELECT ps_partkey FROM partsupp").to_numpy()
        self.ps_supp = self._column("SELECT ps_suppkey FROM partsupp").to_numpy()
        part = con.sql("SELECT p_partkey, p_retailprice FROM part").to_arrow_table()
        self.price = np.zeros(int(pc.max(part["p_partkey"]).as_py()) + 1, dtype=np.int64)
        self.reprice(part)
        customers = self._column("SELECT c_custkey FROM customer").to_numpy()
        self.customers = customers[customers % 3 != 0]
        self.order_comments = self._sample("o_comment", "orders")
        self.line_comments = self._sample("l_comment", "lineitem")
        self.clerks = self._sample("o_clerk", "orders")
        self._picked = np.empty(0, np.int64)

    def _column(self, sql: str) -> pa.ChunkedArray:
        return self.con.sql(sql).to_arrow_table().column(0)

    def _sample(self, column: str, table: str) -> pa.ChunkedArray:
        return self._column(
            f"SELECT {column} FROM {table} USING SAMPLE {self.TEXT_SAMPLE} ROWS"
        ).cast(pa.string())

    def next(self, also_delete: Sequence[int] = ()) -> Batch:
        """RF1 + RF2 as one weighted batch, the deleted rows read from the replica."""
        new_orders, new_lines = self.new_rows()
        picked = self.keys[self.rng.choice(len(self.keys), self.size, replace=False)]
        picked = np.union1d(picked, np.intersect1d(np.asarray(also_delete, np.int64), self.keys))
        self.con.register("__picked", pa.table({"k": picked}))
        try:
            old_orders = self.con.sql(
                "SELECT * FROM orders SEMI JOIN __picked ON o_orderkey = k"
            ).to_arrow_table().cast(new_orders.schema)
            old_lines = self.con.sql(
                "SELECT * FROM lineitem SEMI JOIN __picked ON l_orderkey = k"
            ).to_arrow_table().cast(new_lines.schema)
        finally:
            self.con.unregister("__picked")
        self._picked = picked
        tables = {"orders": weighted(old_orders, new_orders),
                  "lineitem": weighted(old_lines, new_lines)}
        return Batch(tables=tables, after={})

    def commit(self, batch: Batch) -> None:
        """The batch was applied (to ivm and to the replica)."""
        kept = self.keys[~np.isin(self.keys, self._picked)]
        new = np.arange(self.next_key, self.next_key + self.size, dtype=np.int64)
        self.keys = np.concatenate([kept, new])
        self.next_key += self.size


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
