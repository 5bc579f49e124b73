"""Security of names (issue #28, item 6): table, column and view names holding quotes,
slashes, ``..``, SQL comment and statement marks, spaces and Unicode never reach SQL
unquoted (every statement over them works, and a table beside them is untouched) and never
escape the state directory (on disk, in either mode's layout); names with NUL are refused;
a state directory written by another tool is refused, untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import ivm
from bad_input.foreign import WRITERS, files_under
from bad_input.unchanged import assert_views_recompute
from ivm.storage.partitions import MAX_NAME_BYTES, table_directory, view_directory

NASTY = st.sampled_from(['"', "'", "/", "\\", "..", ".", ";", "--", "/*", " ", "\n", "é",
                         "名", "🦆", "%", "%2e", "~", "$", "`", "[", "]", "__ivm", "drop"])
NAMES = st.lists(NASTY | st.text("ab", min_size=1, max_size=2), min_size=1, max_size=5).map(
    "".join).filter(lambda n: not n.lower().startswith("__ivm_"))
"""Names made of the pieces that break quoting, paths and parsing (NUL aside: refused)."""

FAST = settings(max_examples=10, deadline=None, derandomize=True, database=None,
                phases=(Phase.generate,), suppress_health_check=[HealthCheck.too_slow])


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@FAST
@given(NAMES, NAMES)
def test_generated_names_stay_quoted_and_inside_the_state(table: str, column: str) -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        state = root / "state"
        view = table + "_v"
        with ivm.connect(state) as db:
            db.execute("CREATE TABLE canary (a INT)")
            db.ingest("canary", [{"a": 1}])
            db.execute(
                f"CREATE TABLE {quoted(table)} (id BIGINT PRIMARY KEY, {quoted(column)} VARCHAR);"
                f"CREATE VIEW {quoted(view)} AS SELECT {quoted(column)}, COUNT(*) AS n "
                f"FROM {quoted(table)} GROUP BY {quoted(column)}")
            db.changelog(view, retain=5)
            db.ingest(table, [{"id": 1, column: table}, {"id": 2, column: column}])
            db.ingest(table, [{"op": "d", "before": {"id": 2}}])
            db.ingest(table, [{"id": 1, column: view}], mode="upsert")
            assert db.changes(view, since=1).num_rows > 0
            assert db.explain(view) and db.stats()[view].rows == 1
            assert db.check(f"SELECT {quoted(column)} FROM {quoted(table)}")
            assert_views_recompute(db)
        with ivm.connect(state) as db:  # reopened: the saved indexes too
            assert db.read(view).to_pylist() == [{column: view, "n": 1}]
            assert db.read("canary").to_pylist() == [{"a": 1}]
            assert db.epoch == 4
        assert [p.name for p in root.iterdir()] == ["state"]
        for path in state.rglob("*"):
            assert path.resolve().is_relative_to(state.resolve())
            assert table not in path.name or table in {"a", "b", "ab", "ba", "aa", "bb"}


@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(st.lists(NAMES | st.text(min_size=1, max_size=300).filter(lambda n: "\x00" not in n),
                min_size=2, max_size=2, unique=True))
def test_spark_partition_directories_stay_inside_and_apart(names: list[str]) -> None:
    root = Path("/state")
    made = [table_directory(root, n, 7) for n in names] + [view_directory(root, n, 7)
                                                           for n in names]
    assert len(set(made)) == len(made)  # distinct names, distinct directories
    for directory in made:
        assert directory.parent in (root / "tables", root / "views")
        assert directory.name not in (".", "..") and "/" not in directory.name
        assert len(directory.name.encode()) <= MAX_NAME_BYTES + 10


@pytest.mark.parametrize("sql", [
    'CREATE TABLE "a\x00b" (x INT)', 'CREATE TABLE t ("x\x00" INT)',
    'CREATE TABLE t (x INT); CREATE VIEW "v\x00/../x" AS SELECT x FROM t'])
def test_names_with_nul_are_refused(sql: str) -> None:
    with ivm.connect() as db:
        with pytest.raises(ivm.SqlError, match="NUL"):
            db.execute(sql)
        assert db.tables == {} and db.views == {}


@pytest.mark.parametrize("write", list(WRITERS.values()), ids=list(WRITERS))
def test_a_state_directory_of_another_tool_is_refused_untouched(write, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    write(state)
    before, paths = files_under(state), sorted(state.rglob("*"))
    with pytest.raises(ivm.StateError):
        ivm.connect(state)
    assert files_under(state) == before
    assert sorted(state.rglob("*")) == paths
