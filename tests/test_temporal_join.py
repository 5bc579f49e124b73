"""Processing-time temporal joins (``FOR SYSTEM_TIME AS OF PROCTIME()``) against a replay
oracle.

No query can recompute a temporal join (it depends on when rows arrived), so the
oracle replays the workload: it keeps each live left row with the epoch it arrived at
and every epoch's version of ``prices``, and expects each row joined with the version
of its arrival. Random epochs insert, delete and update orders, change and delete
prices (often in the same epoch as the orders that read them), and insert and delete
identical copies of visits (a table without a key: a delete takes back the most recent
arrivals first). Views are created after some epochs, so rows already there arrive at
creation. One workload runs in Spark mode.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.settings import RANDOM_CDC, examples
from oracle.spark import SPARK_PARTITIONS

import ivm

TABLES = ("CREATE TABLE orders (id INTEGER PRIMARY KEY, item INTEGER, qty INTEGER);"
          "CREATE TABLE prices (item INTEGER PRIMARY KEY, price INTEGER);"
          "CREATE TABLE visits (item INTEGER)")
TEMPORAL = "FOR SYSTEM_TIME AS OF PROCTIME()"
VIEWS = {
    "charged": f"SELECT o.id, o.qty, p.price FROM orders o JOIN prices {TEMPORAL} AS p "
               "ON o.item = p.item",
    "maybe_charged": f"SELECT o.id, o.qty, p.price FROM orders o LEFT JOIN prices {TEMPORAL} "
                     "AS p ON o.item = p.item",
    "visit_prices": f"SELECT v.item, p.price FROM visits v LEFT JOIN prices {TEMPORAL} AS p "
                    "ON v.item = p.item",
    "by_price": f"SELECT p.price, SUM(o.qty) AS qty, COUNT(*) AS n FROM orders o "
                f"JOIN prices {TEMPORAL} AS p ON o.item = p.item GROUP BY p.price",
}
ITEMS = (1, 2, 3, None)


class Replay:
    """The oracle: live rows with their arrival epochs, and every version of prices."""

    def __init__(self) -> None:
        self.orders: dict[int, tuple[Any, int, int]] = {}  # id -> (item, qty, arrival)
        self.visits: dict[Any, list[int]] = {}  # item -> arrival epochs, oldest first
        self.prices: dict[int, int] = {}
        self.versions: dict[int, dict[int, int]] = {0: {}}

    def expected(self, view: str) -> Counter[tuple[Any, ...]]:
        rows: Counter[tuple[Any, ...]] = Counter()
        for oid, (item, qty, arrival) in self.orders.items():
            price = self.versions[arrival].get(item)
            if view == "charged" and price is not None or view == "maybe_charged":
                rows[(oid, qty, price)] += 1
        for item, arrivals in self.visits.items():
            if view == "visit_prices":
                for arrival in arrivals:
                    rows[(item, self.versions[arrival].get(item))] += 1
        if view == "by_price":
            sums: dict[int, list[int]] = {}
            for item, qty, arrival in self.orders.values():
                price = self.versions[arrival].get(item)
                if price is not None:
                    total = sums.setdefault(price, [0, 0])
                    total[0] += qty
                    total[1] += 1
            rows = Counter({(p, q, n): 1 for p, (q, n) in sums.items()})
        return rows


def _epoch(rng: random.Random, replay: Replay, next_id: list[int]) -> dict[str, pa.Table]:
    """One random epoch's batches (weighted), applied to the replay's rows (arrivals are
    stamped after the ingest)."""
    changes: dict[str, list[dict[str, Any]]] = {"orders": [], "prices": [], "visits": []}
    touched: set[int] = set()
    left: dict[Any, list[int]] = {}  # item -> arrivals of earlier epochs that left in this one
    for _ in range(rng.randint(1, 6)):
        kind = rng.choice(["new order", "new order", "drop order", "update order", "price",
                           "drop price", "visit", "visit", "leave"])
        if kind == "new order":
            oid = next_id[0] = next_id[0] + 1
            row = {"id": oid, "item": rng.choice(ITEMS), "qty": rng.randint(1, 5)}
            changes["orders"].append({**row, "__w": 1})
            replay.orders[oid] = (row["item"], row["qty"], -1)
        elif kind in ("drop order", "update order") and replay.orders:
            oid = rng.choice(sorted(set(replay.orders) - touched) or [None])
            if oid is None:
                continue
            touched.add(oid)
            item, qty, arrival = replay.orders.pop(oid)
            if arrival >= 0:
                changes["orders"].append({"id": oid, "item": item, "qty": qty, "__w": -1})
            else:  # inserted this epoch: take the insert back
                changes["orders"] = [r for r in changes["orders"] if r["id"] != oid]
            if kind == "update order":
                new = {"id": oid, "item": rng.choice(ITEMS), "qty": qty + 1}
                changes["orders"].append({**new, "__w": 1})
                replay.orders[oid] = (new["item"], new["qty"], -1)
        elif kind in ("price", "drop price"):
            item = rng.choice((1, 2, 3))
            old = replay.prices.pop(item, None)
            if old is not None:
                changes["prices"].append({"item": item, "price": old, "__w": -1})
            if kind == "price":
                replay.prices[item] = rng.randint(10, 14)
                changes["prices"].append({"item": item, "price": replay.prices[item], "__w": 1})
        elif kind == "visit":
            item = rng.choice(ITEMS)
            changes["visits"].append({"item": item, "__w": 1})
            # A batch is a Z-set: a copy that left in this epoch and an identical one that
            # comes back cancel out, so the one that left stays, with its own arrival.
            back = left.get(item)
            replay.visits.setdefault(item, []).append(back.pop() if back else -1)
        elif kind == "leave" and any(replay.visits.values()):
            item = rng.choice([i for i, a in replay.visits.items() if a])
            arrival = replay.visits[item].pop()  # the most recent arrival leaves first
            if arrival >= 0:
                left.setdefault(item, []).append(arrival)
            changes["visits"].append({"item": item, "__w": -1})
    schemas = {"orders": ("id", "item", "qty"), "prices": ("item", "price"), "visits": ("item",)}
    batches = {}
    for table, rows in changes.items():
        if rows:
            columns = {c: [r[c] for r in rows] for c in (*schemas[table], "__w")}
            batches[table] = pa.table({c: pa.array(v, pa.int64()) for c, v in columns.items()})
    return batches


def _stamp(replay: Replay, epoch: int) -> None:
    """Rows that arrived in ``epoch`` (arrival -1) get it; prices as of its end."""
    for oid, (item, qty, arrival) in list(replay.orders.items()):
        if arrival < 0:
            replay.orders[oid] = (item, qty, epoch)
    for arrivals in replay.visits.values():
        arrivals[:] = [epoch if a < 0 else a for a in arrivals]
    replay.versions[epoch] = dict(replay.prices)


def _check(db: Any, replay: Replay, views: list[str], epoch: int) -> None:
    for view in views:
        read = Counter(tuple(r.values()) for r in db.read(view).to_pylist())
        assert read == replay.expected(view), f"after epoch {epoch}: view {view}"


def run_replay(db: Any, rng: random.Random, epochs: int, views: list[str]) -> None:
    db.execute(TABLES)
    replay, next_id = Replay(), [0]
    for _ in range(rng.randint(0, 2)):  # rows that are there before the views
        db.ingest(_epoch(rng, replay, next_id))
        _stamp(replay, db.epoch)
    for view in views:
        db.execute(f"CREATE VIEW {view} AS {VIEWS[view]}")
    _stamp(replay, db.epoch)  # rows already there arrive when the views are created
    for rows in (replay.orders,):
        for oid, (item, qty, _) in list(rows.items()):
            rows[oid] = (item, qty, db.epoch)
    for arrivals in replay.visits.values():
        arrivals[:] = [db.epoch] * len(arrivals)
    _check(db, replay, views, db.epoch)
    for _ in range(epochs):
        batches = _epoch(rng, replay, next_id)
        if not batches:
            continue
        db.ingest(batches)
        _stamp(replay, db.epoch)
        _check(db, replay, views, db.epoch)


@pytest.mark.parametrize("seed", range(4))
def test_temporal_join_against_replay(seed: int) -> None:
    with ivm.connect() as db:
        run_replay(db, random.Random(seed), epochs=12, views=list(VIEWS))


@settings(RANDOM_CDC, max_examples=examples(2))
@given(rng=st.randoms(use_true_random=False))
def test_temporal_join_random_workloads(rng: random.Random) -> None:
    with ivm.connect() as db:
        run_replay(db, rng, epochs=10, views=list(VIEWS))


def test_lock_in_by_hand() -> None:
    with ivm.connect() as db:
        db.execute(TABLES + ";CREATE VIEW charged AS " + VIEWS["charged"]
                   + ";CREATE VIEW visit_prices AS " + VIEWS["visit_prices"])
        db.ingest({"prices": [{"item": 1, "price": 10}], "orders": [{"id": 1, "item": 1,
                                                                       "qty": 2}]})
        db.ingest("prices", [{"item": 1, "price": 12}], mode="upsert")
        assert db.read("charged").to_pylist() == [{"id": 1, "qty": 2, "price": 10}]
        # an order and its price's change in one epoch: the order sees the new price
        db.ingest({"prices": [{"item": 1, "price": 15}], "orders": [{"id": 2, "item": 1,
                                                                       "qty": 1}]},
                  mode="upsert")
        assert sorted(r["price"] for r in db.read("charged").to_pylist()) == [10, 15]
        # deleting the price changes nothing; deleting order 1 takes back its 10
        db.ingest("prices", pa.table({"item": [1], "price": [15], "__w": [-1]}))
        db.ingest("orders", pa.table({"id": [1], "item": [1], "qty": [2], "__w": [-1]}))
        assert db.read("charged").to_pylist() == [{"id": 2, "qty": 1, "price": 15}]
        # copies of a visit: without a price, then with one; a delete takes the newest
        db.ingest("visits", [{"item": 1}])
        db.ingest("prices", [{"item": 1, "price": 20}])
        db.ingest("visits", [{"item": 1}])
        db.ingest("visits", pa.table({"item": [1], "__w": [-1]}))
        assert db.read("visit_prices").to_pylist() == [{"item": 1, "price": None}]
        # a batch is a Z-set: an identical row deleted and inserted in one epoch is no
        # change (not an arrival), in a table without a key and an "update" of a key alike
        db.ingest("prices", [{"item": 1, "price": 30}], mode="upsert")
        db.ingest({"visits": pa.table({"item": [1, 1], "__w": [-1, 1]}),
                   "orders": pa.table({"id": [2, 2], "item": [1, 1], "qty": [1, 1],
                                       "__w": [-1, 1]})})
        assert db.read("visit_prices").to_pylist() == [{"item": 1, "price": None}]
        assert db.read("charged").to_pylist() == [{"id": 2, "qty": 1, "price": 15}]
        db.ingest("orders", pa.table({"id": [2, 2], "item": [1, 1], "qty": [1, 3],
                                      "__w": [-1, 1]}))  # a real update: a new arrival
        assert db.read("charged").to_pylist() == [{"id": 2, "qty": 3, "price": 30}]
        assert "Differentiate" in db.explain("charged")
        assert "Integrate" in db.explain("charged")


@pytest.mark.parametrize(("sql", "construct"), [
    ("SELECT o.id FROM orders o RIGHT JOIN prices FOR SYSTEM_TIME AS OF PROCTIME() AS p "
     "ON o.item = p.item", "RIGHT JOIN"),
    ("SELECT p.price FROM prices FOR SYSTEM_TIME AS OF PROCTIME() AS p", "FOR SYSTEM_TIME"),
    ("SELECT o.id FROM orders o JOIN prices FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01' "
     "AS p ON o.item = p.item", "FOR SYSTEM_TIME"),
])
def test_refused(sql: str, construct: str) -> None:
    with ivm.connect() as db:
        db.execute(TABLES)
        with pytest.raises(ivm.UnsupportedSQL, match=construct):
            db.execute(f"CREATE VIEW v AS {sql}")


def test_temporal_join_on_spark(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("spark-temporal")
    with ivm.connect(directory, spark=spark, partitions=SPARK_PARTITIONS) as db:
        run_replay(db, random.Random(7), epochs=2, views=["visit_prices"])
