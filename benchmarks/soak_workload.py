"""The soak's workload: 5 tables and 19 views covering every operator family of the README's
table, and the random epochs that change the tables (shared by ``bench_soak``, its test
and the fault tests; the DuckDB oracle that checks them is ``soak_oracle``).

Tables (each with a primary key, so the oracle applies a batch by key):

* ``customers`` (id, region, tier) and ``products`` (id, category, price, tags): a few rows
  updated per epoch (rows move between regions, tiers and categories; tags change);
* ``orders`` (id, customer, product, amount, ts): the bulk; each epoch inserts, updates
  and deletes orders in equal measure after the first load, so the live data stays the
  same size (a flat epoch time and state are then the soak's claims to check);
* ``quotes`` (id, product, ts, price): new quotes every epoch, the oldest deleted, so
  orders' ASOF matches move;
* ``edges`` (src, dst): a small graph whose edges come and go (the recursive view, the
  triangles).

Times are BIGINT and unique per product for quotes (ASOF has no ties), amounts and
prices DECIMAL (every aggregate but AVG is exact; AVG is compared within 1e-9). An
update never leaves an order as it was: a delete and an insert of one identical row in
one batch is no change at all, not a new arrival at the temporal join (whose oracle
would then have to tell the two apart).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from decimal import Decimal

import pyarrow as pa

DDL = """
CREATE TABLE customers (id BIGINT PRIMARY KEY, region VARCHAR, tier INTEGER);
CREATE TABLE products (id BIGINT PRIMARY KEY, category VARCHAR, price DECIMAL(10,2),
                       tags VARCHAR[]);
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer BIGINT, product BIGINT,
                     amount DECIMAL(12,2), ts BIGINT);
CREATE TABLE quotes (id BIGINT PRIMARY KEY, product BIGINT, ts BIGINT, price DECIMAL(10,2));
CREATE TABLE edges (src BIGINT, dst BIGINT, PRIMARY KEY (src, dst));
"""

TEMPORAL = "FOR SYSTEM_TIME AS OF PROCTIME()"

VIEWS: dict[str, str] = {
    # aggregates: GROUP BY with invertible aggregates (SUM, COUNT, AVG)
    "by_customer": "SELECT customer, SUM(amount) AS total, COUNT(*) AS n, AVG(amount) AS mean "
    "FROM orders GROUP BY customer",
    # aggregates: running MIN / MAX and, per key, COUNT(DISTINCT)
    "by_product": "SELECT product, MIN(amount) AS low, MAX(amount) AS high, "
    "COUNT(DISTINCT customer) AS buyers FROM orders GROUP BY product",
    # joins: an inner join under a GROUP BY
    "by_region": "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n "
    "FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region",
    # joins: an outer join (customers without big orders padded), a condition in ON
    "customer_orders": "SELECT c.id, c.tier, COUNT(o.id) AS n, SUM(o.amount) AS total "
    "FROM customers c LEFT JOIN orders o ON o.customer = c.id AND o.amount > 500 "
    "GROUP BY c.id, c.tier",
    # joins and aggregates: a 3-way join, its SUM and COUNT factorized
    "region_category": "SELECT /*+ factorize */ c.region, p.category, COUNT(*) AS n, "
    "SUM(o.amount) AS total FROM orders o JOIN customers c ON o.customer = c.id "
    "JOIN products p ON o.product = p.id GROUP BY c.region, p.category",
    # set operations: EXCEPT (set semantics, so DISTINCT too)
    "buyers_not_gold": "SELECT customer AS id FROM orders "
    "EXCEPT SELECT id FROM customers WHERE tier = 3",
    # top-k
    "top_orders": "SELECT id, customer, amount FROM orders ORDER BY amount DESC, id LIMIT 20",
    # subqueries: EXISTS, a semi join
    "sold_products": "SELECT id, category FROM products p "
    "WHERE EXISTS (SELECT 1 FROM orders o WHERE o.product = p.id AND o.amount > 990)",
    # subqueries: NOT IN (an anti join with SQL's three-valued logic)
    "idle_customers": "SELECT id, region FROM customers WHERE id NOT IN "
    "(SELECT customer FROM orders WHERE amount > 900)",
    # structure: a recursive view, nodes reachable from node 0 (an anchor without FROM)
    "reachable": "WITH RECURSIVE r(node) AS (SELECT 0 UNION "
    "SELECT e.dst FROM r JOIN edges e ON e.src = r.node) SELECT node FROM r",
    # joins: a cyclic join (triangles of the graph), a worst-case-optimal join
    "triangles": "SELECT a.src AS x, b.src AS y, c.src AS z FROM edges a "
    "JOIN edges b ON a.dst = b.src JOIN edges c ON b.dst = c.src AND c.dst = a.src",
    # joins: an ASOF join (each order's product price at its time) under a GROUP BY
    "asof_value": "SELECT o.product, COUNT(*) AS n, SUM(q.price) AS quoted "
    "FROM orders o ASOF JOIN quotes q ON o.product = q.product AND o.ts >= q.ts "
    "GROUP BY o.product",
    # joins: the processing-time temporal join (each order charged the price and category
    # its product had when the order arrived)
    "charged": f"SELECT p.category, COUNT(*) AS n, SUM(o.amount) AS total, "
    f"SUM(p.price) AS list_total FROM orders o JOIN products {TEMPORAL} AS p "
    "ON o.product = p.id GROUP BY p.category",
    # windows: ranking, LAG and a windowed SUM over a named window, QUALIFY (ordered by
    # amount, then id: DuckDB numbers peers in any order, ivm by the remaining columns)
    "ranked_orders": "SELECT customer, id, amount, ROW_NUMBER() OVER w AS rn, "
    "LAG(amount) OVER w AS prev, SUM(amount) OVER (PARTITION BY customer) AS customer_total "
    "FROM orders WINDOW w AS (PARTITION BY customer ORDER BY amount DESC, id) QUALIFY rn <= 3",
    # windows: DISTINCT ON (each product's latest quote)
    "latest_quote": "SELECT DISTINCT ON (product) product, ts, price FROM quotes "
    "ORDER BY product, ts DESC",
    # structure: UNNEST of a list column, after a join
    "tag_sales": "SELECT u.tag, COUNT(*) AS n, SUM(o.amount) AS total FROM orders o "
    "JOIN products p ON o.product = p.id, unnest(p.tags) AS u(tag) GROUP BY u.tag",
    # grouping sets: ROLLUP over a join
    "region_tier": "SELECT c.region, c.tier, COUNT(*) AS n, SUM(o.amount) AS total "
    "FROM orders o JOIN customers c ON o.customer = c.id GROUP BY ROLLUP (c.region, c.tier)",
    # structure: PIVOT (a GROUP BY of FILTERed counts)
    "tier_pivot": "PIVOT customers ON tier IN (0, 1, 2, 3) USING count(*) GROUP BY region",
    # structure: a view over a view, a CTE, a comparison with a global AVG
    "rich_regions": "WITH mean AS (SELECT AVG(total) AS m FROM by_region) "
    "SELECT r.region, r.total FROM by_region r, mean WHERE r.total > mean.m",
}
"""Every view, in creation order (a view reads only views before it)."""

COLUMNS: dict[str, tuple[str, ...]] = {
    "customers": ("id", "region", "tier"),
    "products": ("id", "category", "price", "tags"),
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
        [("id", pa.int64()), ("category", pa.string()), ("price", pa.decimal128(10, 2)),
         ("tags", pa.list_(pa.string()))]
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
TAGS = ("new", "sale", "eco", "bulk", "gift", "local", "fragile", "premium")
NODES = 40
"""Nodes of the graph: small, so the recursion stays a few iterations deep."""
OUT_EDGES = 4
"""Edges from each node at the first load: enough for a few dozen triangles."""
EDGE_CHANGES = 6
"""Edges deleted (and as many drawn to insert) per epoch."""


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
            changes["products"].append((self._move_product((i,)), 1))
        for _ in range(s.orders):
            changes["orders"].append((self._order(), 1))
        # quotes before any order's time (distinct, negative), so every order has a match
        for i in range(s.live_quotes):
            changes["quotes"].append((self._quote(i - s.live_quotes), 1))
        for src in range(NODES):
            for dst in rng.sample(range(NODES), OUT_EDGES):
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
            if new == old:  # an update is a change (a new arrival at the temporal join)
                new = (*old[:3], old[3] + Decimal("0.01"), old[4])
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
        for key in edges.pick(rng, EDGE_CHANGES):
            changes["edges"].append((edges.rows[key], -1))
        for _ in range(EDGE_CHANGES):
            edge = (rng.randrange(NODES), rng.randrange(NODES))
            if edge not in edges.rows and all(row != edge for row, _ in changes["edges"]):
                changes["edges"].append((edge, 1))
        return self._apply(changes)

    def _move_customer(self, old: tuple) -> tuple:
        return (old[0], self.rng.choice(REGIONS), self.rng.randrange(4))

    def _move_product(self, old: tuple) -> tuple:
        rng = self.rng
        tags = rng.sample(TAGS, rng.randrange(4))  # none to three: some products untagged
        return (old[0], rng.choice(CATEGORIES), Decimal(rng.randrange(100, 10_000)) / 100, tags)

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
