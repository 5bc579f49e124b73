"""Security of names in Spark mode (issue #28, item 6): table, column and view names holding
quotes, backquotes, slashes, ``..``, dots, SQL comment and statement marks, spaces and
Unicode never reach SQL unquoted, neither DuckDB's (a canary table stays as it was) nor
Spark's (each table and view is registered in the Spark catalog under its own name, and
read back through it; a temporary view of the user's beside them is untouched), and never
escape the state directory: every partition directory is ``tables/t<n>-<name encoded>`` or
``views/v<n>-<name encoded>`` of a live table or view, nothing is written beside the state
directory; names with NUL are refused; a state directory written by another tool, or by
ivm in embedded mode or with another partition count, is refused, every file untouched.
"""

from __future__ import annotations

import json
import tempfile
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from oracle.settings import DEEP
from oracle.spark import SPARK_PARTITIONS

import ivm
from bad_input.foreign import WRITERS, files_under
from bad_input.test_names import NAMES, quoted
from bad_input.unchanged import rows_as_text
from ivm.storage.partitions import encode

pytestmark = pytest.mark.xdist_group("bad_input_names_spark")
"""Under xdist, one worker runs the module."""

PROFILE = settings(max_examples=6, deadline=None, derandomize=True, database=None,
                   phases=(Phase.explicit, Phase.generate) if DEEP else (Phase.explicit,),
                   suppress_health_check=[HealthCheck.too_slow])
"""``make test``: the explicit example alone (each costs a Spark session's DDL, three
epochs and a reopen); the deep profile six generated ones too."""

SPARK_NASTY = st.sampled_from(["`", "``", ".", "a.b", "`.`", "*", "\t"])
"""Pieces that break Spark's parsing of a name, beside ``NAMES``' (quotes, ``..``, …)."""
SPARK_NAMES = st.lists(SPARK_NASTY | NAMES, min_size=1, max_size=3).map("".join).filter(
    lambda n: not n.lower().startswith("__ivm_"))


def spark_name(name: str) -> str:
    """A name as Spark SQL reads it (backquoted), written here apart from ivm's own."""
    return "`" + name.replace("`", "``") + "`"


def spark_rows(spark: Any, names: list[str]) -> dict[str, list[str]]:
    """The rows of each Spark catalog entry of ``names``, read by one Spark SQL query."""
    parts = [f"SELECT {i} AS i, to_json(struct(*)) AS r FROM {spark_name(n)}"
             for i, n in enumerate(names)]
    found: dict[str, list[str]] = {n: [] for n in names}
    for row in spark.sql(" UNION ALL ".join(parts)).collect():
        found[names[row.i]].append(row.r)
    return {n: sorted(rows) for n, rows in found.items()}


def json_rows(db: Any, names: list[str]) -> dict[str, list[str]]:
    """The rows of each table or view of ``names`` as ``spark_rows`` shows them."""
    return {n: sorted(rows_as_json(db.read(n))) for n in names}


def rows_as_json(table: Any) -> list[str]:
    """Each row as the JSON Spark's ``to_json`` writes (keys in column order, no spaces)."""
    return [json.dumps(row, ensure_ascii=False, separators=(",", ":"))
            for row in table.to_pylist()]


def check_layout(db: Any, state: Path, root: Path) -> None:
    """Every table and view directory is its encoded name's, of a live one; nothing left."""
    live = {db._engine.directory(n) for n in [*db.tables, *db.views]}
    found = {*state.glob("tables/*"), *state.glob("views/*")}
    assert found == live, (sorted(map(str, found - live)), sorted(map(str, live - found)))
    for name in [*db.tables, *db.views]:
        directory = db._engine.directory(name)
        encoded = directory.name.split("-", 1)[1]
        assert encoded == encode(name) and "/" not in encoded and "." not in encoded
        assert urllib.parse.unquote(encoded) == name or "~" in encoded  # long: a digest
        assert directory.parent in (state / "tables", state / "views")
    for path in state.rglob("*"):
        assert path.resolve().is_relative_to(state.resolve()), path
    assert [p.name for p in root.iterdir()] == ["state"]


@PROFILE
@example(['x/../y"`.', ".."], "é名 🦆;--'")
@given(st.lists(SPARK_NAMES, min_size=2, max_size=2, unique_by=str.lower), SPARK_NAMES)
def test_generated_names_stay_quoted_and_inside_the_state_on_spark(
    spark: Any, tables: list[str], column: str
) -> None:
    spark.createDataFrame([(1,)], "a INT").createOrReplaceTempView("users_own")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        state = root / "state"
        views = [f"{t}_v" for t in tables]
        with ivm.connect(state, spark=spark, partitions=SPARK_PARTITIONS) as db:
            db.execute(";".join(["CREATE TABLE canary (a INT)", *(
                f"CREATE TABLE {quoted(t)} (id BIGINT PRIMARY KEY, {quoted(column)} VARCHAR);"
                f"CREATE VIEW {quoted(t + '_v')} AS SELECT {quoted(column)}, COUNT(*) AS n "
                f"FROM {quoted(t)} GROUP BY {quoted(column)}" for t in tables)]))
            db.ingest({"canary": [{"a": 1}],
                       **{t: [{"id": 1, column: t}, {"id": 2, column: column}] for t in tables}})
            db.ingest({tables[0]: [{"op": "d", "before": {"id": 2}}],  # read from its files
                       tables[1]: [{"id": 1, column: column}]}, mode="upsert")
            assert db.explain(views[0]) and db.check(f"SELECT {quoted(column)} FROM "
                                                     f"{quoted(tables[0])}")
            names = [*tables, *views, "canary"]
            assert spark_rows(spark, names) == json_rows(db, names)
            assert rows_as_text(db.read(views[0])) == rows_as_text(
                db.sql(f"SELECT {quoted(column)}, 1 AS n FROM {quoted(tables[0])}"))
            db.execute(f"DROP VIEW {quoted(views[0])}")
            with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
                spark.table(spark_name(views[0]))
            check_layout(db, state, root)
        with ivm.connect(state, spark=spark) as db:  # reopened: registered again
            assert db.read(views[1]).to_pylist() == [{column: column, "n": 2}]
            assert db.read("canary").to_pylist() == [{"a": 1}] and db.epoch == 2
            assert spark_rows(spark, [views[1]]) == json_rows(db, [views[1]])
            check_layout(db, state, root)
    assert spark.table("users_own").collect()[0].a == 1


def test_names_with_nul_are_refused_on_spark(spark: Any, tmp_path: Path) -> None:
    with ivm.connect(tmp_path / "state", spark=spark, partitions=SPARK_PARTITIONS) as db:
        for sql in ['CREATE TABLE "a\x00b" (x INT)', 'CREATE TABLE t ("x\x00" INT)',
                    'CREATE TABLE t (x INT); CREATE VIEW "v\x00/../x" AS SELECT x FROM t']:
            with pytest.raises(ivm.SqlError, match="NUL"):
                db.execute(sql)
        assert db.tables == {} and db.views == {}
        assert not list((tmp_path / "state").glob("*/*"))
    assert [p.name for p in tmp_path.iterdir()] == ["state"]


def embedded_state(state: Path, spark: Any) -> None:
    """State ivm wrote in embedded mode."""
    with ivm.connect(state) as db:
        db.execute("CREATE TABLE t (a INT)")
        db.ingest("t", [{"a": 1}])


def other_partitions(state: Path, spark: Any) -> None:
    """Spark-mode state of one more partition than the tests open it with."""
    with ivm.connect(state, spark=spark, partitions=SPARK_PARTITIONS + 1) as db:
        db.execute("CREATE TABLE t (a INT)")


SPARK_WRITERS: dict[str, Callable[[Path, Any], None]] = {
    **{key: (lambda state, spark, write=write: write(state)) for key, write in WRITERS.items()},
    "embedded-mode-state": embedded_state, "other-partition-count": other_partitions,
}


@pytest.mark.parametrize("write", list(SPARK_WRITERS.values()), ids=list(SPARK_WRITERS))
def test_a_state_directory_of_another_tool_is_refused_untouched_on_spark(
    write: Callable[[Path, Any], None], spark: Any, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    write(state, spark)
    before, paths = files_under(state), sorted(state.rglob("*"))
    with pytest.raises(ivm.StateError):
        ivm.connect(state, spark=spark, partitions=SPARK_PARTITIONS)
    assert files_under(state) == before
    assert sorted(state.rglob("*")) == paths
