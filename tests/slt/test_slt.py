"""The sqllogictest runner's parts (``make test-slt`` runs the corpus, outside this suite):
the record parser, the CDC epochs it builds from a script's rows, and one small script
end to end; then the failures the corpus found, as strict xfails until fixed."""

from __future__ import annotations

import gzip
import random
from collections import Counter
from pathlib import Path

from fuzz.driver import Drive, Outcome
from fuzz.test_fuzz import maintained_or_refused
from oracle.harness import Epoch, net_change

from slt.parser import parse, read_text, strip_results
from slt.runner import CORPUS, State, cdc_epochs, run_script, states

SCRIPT = """hash-threshold 8

statement ok
CREATE TABLE t1(a INTEGER, b INTEGER, c VARCHAR(10))

statement ok
INSERT INTO t1 VALUES(1,2,'x')

statement ok
INSERT INTO t1 VALUES(3,NULL,'y'),(1,2,'x')

query II rowsort
SELECT a, b FROM t1 WHERE a > 0
----
1
2
3
NULL

onlyif mysql
query I nosort
SELECT 1 DIV 2

skipif sqlite
query I nosort
SELECT 1

query I valuesort label-1
SELECT count(*) FROM t1
----
3

query T nosort
SELECT c FROM nowhere

statement ok
DELETE FROM t1 WHERE a = 3

query I nosort
SELECT sum(a) FROM t1 GROUP BY c

onlyif mssql
halt

query I nosort
SELECT a + b FROM t1
"""


def test_parse_records() -> None:
    records = list(parse(SCRIPT))
    kinds = [(r.kind, r.runs_on()) for r in records]
    assert kinds == [("statement", True)] * 3 + [("query", True), ("query", False),
                                                 ("query", False), ("query", True),
                                                 ("query", True), ("statement", True),
                                                 ("query", True), ("query", True)]
    query = records[3]
    assert (query.sql, query.types, query.sort) == ("SELECT a, b FROM t1 WHERE a > 0", "II",
                                                    "rowsort")
    assert records[6].label == "label-1"
    assert list(parse("statement ok\nSELECT 1\n\nskipif mssql\nhalt\n\nquery I\nSELECT 2\n"))
    assert len(list(parse("statement ok\nSELECT 1\n\nhalt\n\nquery I\nSELECT 2\n"))) == 1


def test_strip_results_keeps_statements_and_every_nth_query() -> None:
    stripped = strip_results(SCRIPT.replace("\n", "\r\n"), every=2)
    records = list(parse(stripped))
    assert "----" not in stripped
    assert [r.kind for r in records].count("statement") == 4
    assert [r.sql for r in records if r.kind == "query"] == [
        "SELECT a, b FROM t1 WHERE a > 0", "SELECT 1", "SELECT c FROM nowhere",
        "SELECT a + b FROM t1"]


def test_states_group_queries_by_the_data_they_see() -> None:
    found = list(states(SCRIPT))
    assert [len(s.queries) for s, _ in found] == [2, 2]
    assert [rejected for _, rejected in found] == [1, 0]  # "nowhere" is no table
    first, second = found[0][0], found[1][0]
    assert sorted(first.rows["t1"], key=repr) == sorted(
        [(1, 2, "x"), (3, None, "y"), (1, 2, "x")], key=repr)
    assert second.rows["t1"] == [(1, 2, "x"), (1, 2, "x")]


def test_cdc_epochs_end_with_the_scripts_data() -> None:
    rows = [(i, i % 3, "x") for i in range(10)] + [(1, 1, "x")] * 2
    state = State({"t1": "CREATE TABLE t1(a INTEGER, b INTEGER, c VARCHAR)"}, {"t1": rows}, [])
    epochs = cdc_epochs(state, ["t1"], random.Random(3))
    assert len(epochs) == 8
    total: Counter = Counter()
    deleted = False
    for epoch in epochs:
        for change in epoch.changes:
            net = net_change(change.ops)
            deleted |= any(w < 0 for w in net.values())
            total.update(net)
        assert all(w >= 0 for w in total.values()), "an epoch deletes a row that is not there"
    assert deleted
    assert +total == Counter(rows)


def test_cdc_epochs_keep_primary_keys_unique() -> None:
    rows = [(k, k % 4, "x") for k in range(12)]
    state = State({"t": "CREATE TABLE t(k INTEGER PRIMARY KEY, v INTEGER, s VARCHAR)"},
                  {"t": rows}, [])
    for seed in range(30):
        live: Counter = Counter()
        for epoch in cdc_epochs(state, ["t"], random.Random(seed)):
            for change in epoch.changes:
                live.update(net_change(change.ops))
            keys = Counter(r[0] for r, n in live.items() for _ in range(n))
            assert max(keys.values(), default=1) == 1, f"seed {seed}: a key held twice"
        assert +live == Counter(rows)


def test_a_small_script_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "small.test.gz"
    path.write_bytes(gzip.compress(SCRIPT.encode()))
    run = run_script(path)
    outcomes = Counter(r.outcome for r in run.results)
    assert run.rejected == 1
    assert outcomes == Counter({Outcome.EXACT: 4}), [r.detail for r in run.results]
    assert all(r.rows > 0 and r.epoch == 8 for r in run.results)


def test_the_corpus_is_there() -> None:
    scripts = sorted(CORPUS.glob("*.test.gz"))
    assert len(scripts) == 20
    queries = sum(1 for s in scripts for r in parse(read_text(s)) if r.kind == "query")
    assert queries > 15_000


SELECT1 = ["CREATE TABLE t1(a INTEGER, b INTEGER, c INTEGER, d INTEGER, e INTEGER)"]
ROWS1 = [(104, 100, 102, 101, 103), (107, 105, 106, 108, 109), (111, 112, 113, 114, 110)]
TAB0 = ["CREATE TABLE tab0(col0 INTEGER, col1 INTEGER, col2 INTEGER)"]
ROWS0 = [(97, 1, 99), (15, 81, 47), (87, 21, 10)]


def _load(table: str, rows: list[tuple]) -> list[Epoch]:
    return [Epoch.of({table: [("insert", r) for r in rows]})]


def test_slt_group_by_column_alone() -> None:
    maintained_or_refused({"v": "SELECT col1 FROM tab0 GROUP BY col1"}, _load("tab0", ROWS0),
                          TAB0)


def test_slt_order_by_position_of_a_subquery() -> None:
    maintained_or_refused(
        {"v": "SELECT a, (SELECT count(*) FROM t1 AS x WHERE x.b < t1.b) FROM t1 ORDER BY 2"},
        _load("t1", ROWS1), SELECT1)


def test_slt_hex_string_literal() -> None:
    """F5 (evidence/in1.test): DuckDB's ``x'…'`` is a BLOB literal."""
    db_rows = [(1, 2, 3, 4, 5)]
    results = Drive(SELECT1, {
        "v": "SELECT x'303132' AS c, a FROM t1 WHERE x'41' < X'4142'",
        "w": "SELECT a FROM t1 WHERE CAST(a AS VARCHAR)::BLOB IN (x'31', x'', X'3130')",
    }, lambda _h, i: _load("t1", db_rows + [(10, 0, 0, 0, 0)])[i], 1).run()
    assert {r.name: r.outcome for r in results.values()} == {"v": Outcome.EXACT,
                                                             "w": Outcome.EXACT}
