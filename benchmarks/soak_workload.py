"""The soak's workload: 5 tables, 10 views across the operator families, random epochs,
and a DuckDB oracle holding the same tables (shared by ``bench_soak`` and its test).

Tables (each with a primary key, so the oracle applies a batch by key):

* ``customers`` (id, region, tier) and ``products`` (id, category, price): a few rows
  updated per epoch (rows move between regions, tiers and categories);
* ``orders`` (id, customer, product, amount, ts): the bulk; each epoch inserts, updates
  and deletes orders in equal measure after the first load, so the live data stays the
  same size (a flat epoch time and state are then the soak's claims to check);
* ``quotes`` (id, product, ts, price): new quotes every epoch, the oldest deleted, so
  orders' ASOF matches move;
* ``edges`` (src, dst): a small graph whose edges come and go (the recursive view).

Times are BIGINT and unique per product for quotes (ASOF has no ties), amounts and
prices DECIMAL (every aggregate but AVG is exact; AVG is compared within 1e-9).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa

DDL = """
CREATE TABLE customers (id BIGINT PRIMARY KEY, region VARCHAR, tier INTEGER);
CREATE TABLE products (id BIGINT PRIMARY KEY, category VARCHAR, price DECIMAL(10,2));
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer BIGINT, product BIGINT,
                     amount DECIMAL(12,2), ts BIGINT);
CREATE TABLE quotes (id BIGINT PRIMARY KEY, product BIGINT, ts BIGINT, price DECIMAL(10,2));
CREATE TABLE edges (src BIGINT, dst BIGINT, PRIMARY KEY (src, dst));
"""

VIEWS: dict[str, str] = {
    # GROUP BY with invertible aggregates (SUM, COUNT, AVG)
    "by_customer": "SELECT customer, SUM(amount) AS total, COUNT(*) AS n, AVG(amount) AS mean "
    "FROM orders GROUP BY customer",
    # MIN / MAX and COUNT(DISTINCT): per-key recomputation
    "by_product": "SELECT product, MIN(amount) AS low, MAX(amount) AS high, "
    "COUNT(DISTINCT customer) AS buyers FROM orders GROUP BY product",
    # an inner join under a GROUP BY
    "by_region": "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n "
    "FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region",
    # an outer join (customers without orders padded)
    "customer_orders": "SELECT c.id, c.tier, COUNT(o.id) AS n, SUM(o.amount) AS total "
    "FROM customers c LEFT JOIN orders o ON o.customer = c.id AND o.amount > 500 "
    "GROUP BY c.id, c.tier",
    # a 3-way join
    "region_category": "SELECT c.region, p.category, COUNT(*) AS n, SUM(o.amount) AS total "
    "FROM orders o JOIN customers c ON o.customer = c.id JOIN products p ON o.product = p.id "
    "GROUP BY c.region, p.category",
    # a set operation (EXCEPT: set semantics, so DISTINCT too)
    "buyers_not_gold": "SELECT customer AS id FROM orders "
    "EXCEPT SELECT id FROM customers WHERE tier = 3",
    # top-k
    "top_orders": "SELECT id, customer, amount FROM orders ORDER BY amount DESC, id LIMIT 20",
    # a semi join
    "sold_products": "SELECT id, category FROM products p "
    "WHERE EXISTS (SELECT 1 FROM orders o WHERE o.product = p.id AND o.amount > 990)",
    # a recursive view: nodes reachable from node 0
    "reachable": "WITH RECURSIVE r(node) AS (SELECT 0 UNION "
    "SELECT e.dst FROM r JOIN edges e ON e.src = r.node) SELECT node FROM r",
    # an ASOF join (each order's product price at its time) under a GROUP BY
    "asof_value": "SELECT o.product, COUNT(*) AS n, SUM(q.price) AS quoted "
    "FROM orders o ASOF JOIN quotes q ON o.product = q.product AND o.ts >= q.ts "
    "GROUP BY o.product",
}

COLUMNS: dict[str, tuple[str, ...]] = {
    "customers": ("id", "region", "tier"),
    "products": ("id", "category", "price"),
    "orders": ("id", "customer", "product", "amount", "ts"),
    "quotes": ("id", "product", "ts", "price"),
    "edges": ("src", "dst"),
}
KEYS: dict[str, tuple[str, ...]] = {
    "customers": ("id",), "products": ("id",), "orders": ("id",), "quotes": ("id",),
    "edges": ("src", "dst"),
}
TYPES: dict[str, pa.Schema] = {
    "customers": pa.schema([("id", pa.int64()), ("region", pa.string()), ("tier", pa.int32())]),
    "products": pa.schema(
        [("id", pa.int64()), ("category", pa.string()), ("price", pa.decimal128(10, 2))]
    ),
    "orders": pa.schema([
        ("id", pa.int64()), ("customer", pa.int64()), ("product", pa.int64()),
        ("amount", pa.decimal128(12, 2)), ("ts", pa.int64()),
    ]),
    "quotes": pa.schema([
        ("id", pa.int64()), ("product", pa.int64()), ("ts", pa.int64()),
        ("price", pa.decimal128(10, 2)),
    ]),
    "edges": pa.schema([("src", pa.int64()), ("dst", pa.int64())]),
}
REGIONS = ("EMEA", "AMER", "APAC", "LATAM", "ANZ")
CATEGORIES = tuple(f"cat{i}" for i in range(12))
NODES = 40
"""Nodes of the graph: small, so the recursion stays a few iterations deep."""
FLOAT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Scale:
    """How big the soak is: the live rows and each epoch's batch sizes (orders changed)."""

    customers: int = 20_000
    products: int = 2_000
    orders: int = 200_000
    quotes_per_epoch: int = 50
    live_quotes: int = 20_000
    batch_sizes: tuple[int, ...] = (200, 1_000, 4_000, 10_000)
    """Orders changed per epoch, drawn uniformly: mixed batch sizes."""


class Live:
    """One table's live rows by key, with O(1) random picks and removals."""

    def __init__(self) -> None:
        self.keys: list[tuple] = []
        self.rows: dict[tuple, tuple] = {}
        self._where: dict[tuple, int] = {}

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key: tuple, row: tuple) -> None:
        """Insert ``row`` under ``key`` (not live)."""
        self._where[key] = len(self.keys)
        self.keys.append(key)
        self.rows[key] = row

    def remove(self, key: tuple) -> tuple:
        """Remove ``key``'s row and return it."""
        at = self._where.pop(key)
        last = self.keys.pop()
        if at < len(self.keys):
            self.keys[at] = last
            self._where[last] = at
        return self.rows.pop(key)

    def pick(self, rng: random.Random, count: int) -> list[tuple]:
        """Up to ``count`` distinct live keys."""
        return rng.sample(self.keys, min(count, len(self.keys)))


@dataclass
class Workload:
    """The generator of the soak's epochs, keeping every table's live rows (the oracle's
    knowledge of what deletes and updates may touch)."""

    scale: Scale = field(default_factory=Scale)
    seed: int = 0
    epoch: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.live = {name: Live() for name in COLUMNS}
        self.next_order = 0
        self.next_quote = 0

    # --- rows -------------------------------------------------------------------------

    def _order(self) -> tuple:
        s, rng = self.scale, self.rng
        self.next_order += 1
        amount = Decimal(rng.randrange(100, 100_000)) / 100
        ts = self.epoch * 1_000 + rng.randrange(1_000)
        return (self.next_order, rng.randrange(s.customers), rng.randrange(s.products), amount, ts)

    def _quote(self, ts: int | None = None) -> tuple:
        self.next_quote += 1
        price = Decimal(self.rng.randrange(100, 50_000)) / 100
        if ts is None:  # an epoch's quotes take distinct times in its range: no ties
            ts = self.epoch * 1_000 + self.next_quote % 1_000
        return (self.next_quote, self.rng.randrange(self.scale.products), ts, price)

    # --- epochs -----------------------------------------------------------------------

    def first(self) -> dict[str, pa.Table]:
        """Epoch 1: the initial load of every table."""
        s, rng = self.scale, self.rng
        self.epoch = 1
        changes: dict[str, list[tuple[tuple, int]]] = {name: [] for name in COLUMNS}
        for i in range(s.customers):
            changes["customers"].append(((i, rng.choice(REGIONS), rng.randrange(4)), 1))
        for i in range(s.products):
            price = Decimal(rng.randrange(100, 10_000)) / 100
            changes["products"].append(((i, rng.choice(CATEGORIES), price), 1))
        for _ in range(s.orders):
            changes["orders"].append((self._order(), 1))
        # quotes before any order's time (distinct, negative), so every order has a match
        for i in range(s.live_quotes):
            changes["quotes"].append((self._quote(i - s.live_quotes), 1))
        for src in range(NODES):
            for dst in rng.sample(range(NODES), 2):
                changes["edges"].append(((src, dst), 1))
        return self._apply(changes)

    def next(self) -> dict[str, pa.Table]:
        """The next epoch: orders inserted, updated and deleted in equal shares (the live
        count stays put), a few customers and products updated, new quotes in and the
        oldest out, edges replaced."""
        self.epoch += 1
        rng = self.rng
        size = rng.choice(self.scale.batch_sizes)
        changes: dict[str, list[tuple[tuple, int]]] = {name: [] for name in COLUMNS}
        orders = self.live["orders"]
        touched = orders.pick(rng, 2 * size // 3)
        deleted, updated = touched[: len(touched) // 2], touched[len(touched) // 2:]
        for key in deleted:
            changes["orders"].append((orders.rows[key], -1))
        for key in updated:
            old = orders.rows[key]
            new = (old[0], old[1], rng.randrange(self.scale.products),
                   Decimal(rng.randrange(100, 100_000)) / 100, old[4])
            changes["orders"] += [(old, -1), (new, 1)]
        for _ in range(len(deleted)):
            changes["orders"].append((self._order(), 1))
        for name, move in (("customers", self._move_customer), ("products", self._move_product)):
            for key in self.live[name].pick(rng, 5):
                old = self.live[name].rows[key]
                changes[name] += [(old, -1), (move(old), 1)]
        quotes = self.live["quotes"]
        oldest = sorted(quotes.keys)[: self.scale.quotes_per_epoch]
        changes["quotes"] += [(quotes.rows[key], -1) for key in oldest]
        changes["quotes"] += [(self._quote(), 1) for _ in range(self.scale.quotes_per_epoch)]
        edges = self.live["edges"]
        for key in edges.pick(rng, 3):
            changes["edges"].append((edges.rows[key], -1))
        for _ in range(3):
            edge = (rng.randrange(NODES), rng.randrange(NODES))
            if edge not in edges.rows and all(row != edge for row, _ in changes["edges"]):
                changes["edges"].append((edge, 1))
        return self._apply(changes)

    def _move_customer(self, old: tuple) -> tuple:
        return (old[0], self.rng.choice(REGIONS), self.rng.randrange(4))

    def _move_product(self, old: tuple) -> tuple:
        return (old[0], self.rng.choice(CATEGORIES), Decimal(self.rng.randrange(100, 10_000)) / 100)

    def _apply(self, changes: dict[str, list[tuple[tuple, int]]]) -> dict[str, pa.Table]:
        """Track ``changes`` in the live rows; the batches (Arrow with ``__w``)."""
        batches = {}
        for name, rows in changes.items():
            if not rows:
                continue
            live, width = self.live[name], len(KEYS[name])
            for row, weight in rows:
                key = row[:width] if name == "edges" else row[:1]
                if weight < 0:
                    live.remove(key)
                else:
                    live.add(key, row)
            columns = list(zip(*(row for row, _ in rows), strict=True))
            arrays = [pa.array(values, type=f.type)
                      for values, f in zip(columns, TYPES[name], strict=True)]
            weights = pa.array([w for _, w in rows], type=pa.int64())
            batches[name] = pa.Table.from_arrays(
                [*arrays, weights], schema=TYPES[name].append(pa.field("__w", pa.int64()))
            )
        return batches


def changed_rows(batches: dict[str, pa.Table]) -> int:
    """Rows of an epoch's batches (an update counts twice: its delete and its insert)."""
    return sum(batch.num_rows for batch in batches.values())


class Oracle:
    """Plain DuckDB tables holding what the workload sent, and the views recomputed."""

    def __init__(self) -> None:
        self.con = duckdb.connect()
        for name, schema in TYPES.items():
            empty = schema.empty_table()  # noqa: F841 - read by DuckDB's replacement scan
            self.con.execute(f"CREATE TABLE {name} AS SELECT * FROM empty")

    def apply(self, batches: dict[str, pa.Table]) -> None:
        """Apply one epoch's batches: deletes by key, then inserts."""
        for name, batch in batches.items():  # noqa: B007 - batch read by DuckDB's scan
            keys = ", ".join(KEYS[name])
            columns = ", ".join(COLUMNS[name])
            self.con.execute(
                f"DELETE FROM {name} WHERE ({keys}) IN "
                f"(SELECT ({keys}) FROM batch WHERE __w < 0)"
            )
            self.con.execute(f"INSERT INTO {name} SELECT {columns} FROM batch WHERE __w > 0")

    def view(self, name: str, sql: str | None = None) -> pa.Table:
        """View ``name`` (or the query ``sql``) recomputed over the oracle's tables."""
        return self.con.sql(sql or VIEWS[name]).to_arrow_table()

    def table(self, name: str) -> pa.Table:
        """Table ``name``'s rows."""
        return self.con.sql(f"SELECT * FROM {name}").to_arrow_table()


def _exact_part(row: tuple) -> tuple:
    return tuple(None if isinstance(v, float) else v for v in row)


def mismatch(expected: pa.Table, actual: pa.Table) -> str | None:
    """None when the tables hold the same rows (a multiset; floats within 1e-9 relative);
    else a short description of the difference."""
    want = [tuple(r.values()) for r in expected.to_pylist()]
    got = [tuple(r.values()) for r in actual.to_pylist()]
    want_exact, got_exact = Counter(map(_exact_part, want)), Counter(map(_exact_part, got))
    if want_exact != got_exact:
        missing = list((want_exact - got_exact).elements())[:5]
        extra = list((got_exact - want_exact).elements())[:5]
        return f"{len(want)} rows expected, {len(got)} held; missing {missing}, extra {extra}"
    order = sorted(range(len(want)), key=lambda i: repr(_exact_part(want[i])))
    held = sorted(range(len(got)), key=lambda i: repr(_exact_part(got[i])))
    for i, j in zip(order, held, strict=True):
        for a, b in zip(want[i], got[j], strict=True):
            if isinstance(a, float) and not (
                isinstance(b, float)
                and math.isclose(a, b, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE)
            ):
                return f"row {want[i]} held as {got[j]}"
    return None


def check_exact(db: Any, oracle: Oracle, where: str, views: dict[str, str] | None = None) -> None:
    """Every table and view (``views``: name to SQL, by default all of ``VIEWS``) of ``db``
    equals the oracle's (AssertionError naming the first that does not)."""
    for name in COLUMNS:
        found = mismatch(oracle.table(name), db.read(name))
        assert found is None, f"{where}: table {name}: {found}"
    for name, sql in (VIEWS if views is None else views).items():
        found = mismatch(oracle.view(name, sql), db.read(name))
        assert found is None, f"{where}: view {name}: {found}"
