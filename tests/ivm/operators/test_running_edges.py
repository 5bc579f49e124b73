"""ivm.operators.running_aggregate: scripted edge cases, and when a group is recomputed.

Every epoch is checked by the oracle harness against DuckDB; besides, each test
says how many groups the epoch recomputed from their rows (``recomputed``: the
operator marks recomputed versions), so a recompute that should be skipped, or
one that must happen, shows. The last tests sabotage the guards to show these
checks can fail.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from running_cases import recomputed, script, value

from ivm.functions import running
from ivm.operators import running_aggregate, running_step
from ivm.operators.invertible_aggregate import InMemory

NAN, INF = float("nan"), float("inf")
T = "CREATE TABLE t (g INTEGER, x DOUBLE, tag VARCHAR)"
SUMS = "SELECT g, SUM(x) AS s, AVG(x) AS a, COUNT(x) AS n FROM t GROUP BY g"
EXTREMES = "SELECT g, MAX(x) AS hi, MIN(x) AS lo, COUNT(*) AS n FROM t GROUP BY g"


def rows(*values: Any, g: int = 1) -> list[tuple[Any, ...]]:
    return [(g, v, None) for v in values]


def ins(*values: Any, g: int = 1) -> list[tuple[str, tuple[Any, ...]]]:
    return [("insert", r) for r in rows(*values, g=g)]


def dels(*values: Any, g: int = 1) -> list[tuple[str, tuple[Any, ...]]]:
    return [("delete", r) for r in rows(*values, g=g)]


def same(a: Any, b: Any) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) \
        or a == b


def test_nan_and_infinities_in_and_out() -> None:
    expected = [  # (SUM, MAX, MIN) of group 1 after each epoch
        (4.0, 2.5, 1.5), (NAN, NAN, 1.5), (4.0, 2.5, 1.5), (INF, INF, 1.5), (NAN, INF, -INF),
        (-INF, 2.5, -INF), (4.0, 2.5, 1.5), (NAN, NAN, -INF), (4.0, 2.5, 1.5),
    ]

    def check(i: int, harness: Any) -> None:
        got = (value(harness, "v", "s", g=1), value(harness, "e", "hi", g=1),
               value(harness, "e", "lo", g=1))
        assert all(same(a, b) for a, b in zip(got, expected[i], strict=True)), (i, got)
        # NaN and the infinities are counted apart: the sum never needs the rows
        # (the extremes do, when NaN or an infinity was the extreme and leaves).
        assert recomputed(harness, "v") == 0, i

    script([T], {"v": SUMS, "e": EXTREMES}, [
        {"t": ins(1.5, 2.5)},
        {"t": ins(NAN)},
        {"t": dels(NAN)},
        {"t": ins(INF)},
        {"t": ins(-INF)},                       # both infinities: NaN
        {"t": dels(INF)},
        {"t": dels(-INF)},                      # back to the finite sum, exactly
        {"t": ins(INF, -INF, NAN)},
        {"t": dels(INF, -INF, NAN)},
    ], check)


def test_cancellation_is_exact_without_reading_rows() -> None:
    def check(i: int, harness: Any) -> None:
        if i == 1:  # 1e17 + 1 − 1e17: exact sums say 1, with no row read
            assert value(harness, "v", "s", g=1) == 1.0
            assert value(harness, "v", "a", g=1) == 1.0
        if i == 2:
            assert value(harness, "v", "s", g=1) == 4.0
        assert recomputed(harness, "v") == 0, i

    script([T], {"v": SUMS}, [
        {"t": ins(1e17, 1.0) + ins(2.0, g=2)},
        {"t": dels(1e17) + ins(5.0, g=2)},
        {"t": ins(3.0)},
    ], check)


def test_many_tiny_values_then_a_huge_one_deleted() -> None:
    tiny = [k * 1e-6 for k in range(1, 1001)]

    def check(i: int, harness: Any) -> None:
        if i == 1:  # the exact sum of what is left, rounded once
            assert value(harness, "v", "s", g=1) == math.fsum(tiny)
        assert recomputed(harness, "v") == 0, i

    script([T], {"v": SUMS}, [
        {"t": ins(*tiny, 1e15)},
        {"t": dels(1e15)},
        {"t": ins(1e-6)},
    ], check)


def test_values_out_of_the_exact_range_read_their_group() -> None:
    # 1e-20 has bits below 2^-96 and 1e30 is past 2^93: counted apart, and a group holding
    # one is read from its rows whenever touched (DuckDB's SUM of them), until none is left.
    expected = [  # (SUM of group 1, groups recomputed) after each epoch
        (3.0, 0),
        (3.0 + 1e-20, 1),
        (3.0 + 1e-20 + 1e30, 1),
        (3.0 + 1e-20 + 1e30, 0),   # only group 2 touched
        (4.0 + 1e-20 + 1e30, 1),
        (4.0, 0),                  # both gone: exact again, no read
    ]

    def check(i: int, harness: Any) -> None:
        got = (value(harness, "v", "s", g=1), recomputed(harness, "v"))
        assert got == expected[i], (i, got)

    script([T], {"v": SUMS}, [
        {"t": ins(1.0, 2.0) + ins(5.0, g=2)},
        {"t": ins(1e-20)},
        {"t": ins(1e30)},
        {"t": ins(6.0, g=2)},
        {"t": ins(1.0)},
        {"t": dels(1e-20, 1e30)},
    ], check)


def test_deleting_the_extreme() -> None:
    expected = [  # (MAX, MIN, groups recomputed) after each epoch
        (5.0, 3.0, 0),
        (5.0, 3.0, 0),   # one of two copies of the max deleted (a copy left): no recompute
        (5.0, 3.0, 0),   # a third copy, in an epoch of its own
        (5.0, 3.0, 0),   # and another one deleted
        (4.0, 3.0, 1),   # the last copy of the max deleted: recomputed
        (4.0, 3.0, 0),   # a value that is not the max deleted
        (9.0, 3.0, 0),   # the max deleted, a better one inserted by the same change
        (4.0, 3.0, 1),   # the max deleted, a worse one inserted: recomputed
        (4.0, 3.0, 0),   # the min's copies: a copy left
        (4.0, 4.0, 1),   # the min's last copy deleted: recomputed
    ]

    def check(i: int, harness: Any) -> None:
        got = (value(harness, "e", "hi", g=1), value(harness, "e", "lo", g=1),
               recomputed(harness, "e"))
        assert got == expected[i], (i, got)

    script([T], {"e": EXTREMES}, [
        {"t": ins(5.0, 5.0, 3.0, 3.0, 4.0, 2.0 + 2.0)},
        {"t": dels(5.0)},
        {"t": ins(5.0)},
        {"t": dels(5.0)},
        {"t": dels(5.0)},
        {"t": dels(4.0)},
        {"t": dels(4.0) + ins(9.0, 4.0)},
        {"t": dels(9.0) + ins(3.5)},
        {"t": dels(3.0)},
        {"t": dels(3.0) + dels(3.5)},
    ], check)


def test_a_group_emptied_and_refilled_in_one_epoch() -> None:
    expected = [(8.0, 5.0), (1.0, 1.0), (7.0, 6.0), None]  # group 1's (SUM, MAX)

    def check(i: int, harness: Any) -> None:
        if expected[i] is None:  # group 1 is gone
            assert [r["g"] for r in harness.db.read("e").to_pylist()] == [2]
        else:
            got = (value(harness, "v", "s", g=1), value(harness, "e", "hi", g=1))
            assert got == expected[i], (i, got)
        assert (recomputed(harness, "v"), recomputed(harness, "e")) == (0, 0), i

    script([T], {"v": SUMS, "e": EXTREMES}, [
        {"t": ins(5.0, 3.0) + ins(1.0, g=2)},
        {"t": dels(5.0, 3.0) + ins(1.0)},        # emptied, refilled with a worse value
        {"t": dels(1.0) + ins(6.0, 1.0)},
        {"t": dels(6.0, 1.0) + ins(2.0, g=2)},   # group 1 gone
    ], check)


def test_groups_of_nulls_and_filtered_out_rows() -> None:
    views = {"v": "SELECT g, SUM(x) AS s, AVG(x) AS a, MAX(x) AS hi, MIN(tag) AS lt, "
                  "SUM(x) FILTER (WHERE tag = 'y') AS sy, MAX(x) FILTER (WHERE tag = 'y') AS hy, "
                  "COUNT(*) AS n FROM t GROUP BY g"}
    null_rows = [(1, None, None), (1, None, "z")]

    def check(i: int, harness: Any) -> None:
        if i in (0, 2):
            (only,) = harness.db.read("v").to_pylist()
            assert [only[c] for c in ("s", "a", "hi", "sy", "hy")] == [None] * 5
            assert only["lt"] == "z"
        # Epoch 3 deletes the only 'y', MIN(tag): that extreme leaves and is recomputed.
        assert recomputed(harness, "v") == (1 if i == 2 else 0), i

    script([T], views, [
        {"t": [("insert", r) for r in null_rows]},                    # values all NULL
        {"t": [("insert", (1, 2.0, "z")), ("insert", (1, 3.0, "y"))]},
        {"t": [("delete", (1, 2.0, "z")), ("delete", (1, 3.0, "y"))]},  # all NULL again
        {"t": [("update", (1, None, "z"), (1, 7.0, "z"))]},            # filtered out
        {"t": [("delete", r) for r in [(1, None, None), (1, 7.0, "z")]]},
    ], check)


def test_real_arguments_sum_as_double() -> None:
    views = {"v": "SELECT g, SUM(r) AS s, AVG(r) AS a, MAX(r) AS hi, MIN(r) AS lo "
                  "FROM f GROUP BY g"}
    table = "CREATE TABLE f (g INTEGER, r REAL)"

    def check(i: int, harness: Any) -> None:
        types = harness.db.read("v").schema
        assert str(types.field("s").type) == "double" and str(types.field("hi").type) == "float"

    script([table], views, [
        {"f": [("insert", (1, 0.1)), ("insert", (1, 0.2)), ("insert", (1, 3e38))]},
        {"f": [("insert", (1, 3e38))]},      # past REAL's range: DuckDB sums as DOUBLE
        {"f": [("delete", (1, 3e38)), ("insert", (1, float("inf")))]},
        {"f": [("delete", (1, 3e38)), ("delete", (1, float("inf")))]},
    ], check)


# --- the checks above can fail ------------------------------------------------------------

def _in_statements(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every running aggregate steps in its statements, never in memory."""
    monkeypatch.setattr(running_aggregate, "stepped_in_memory",
                        lambda op, run, change: InMemory.UNDECIDED)


def _sabotaged(monkeypatch: pytest.MonkeyPatch, guard: type, path: str, flag: str) -> None:
    """``guard``'s flag made ``flag`` ("never" or "always" where values are live) on
    ``path``: the statements' SQL, or the in-memory step's Arrow twin."""
    if path == "statements":
        _in_statements(monkeypatch)
        sql = "false" if flag == "never" else None
        monkeypatch.setattr(guard, "flag",
                            lambda self, new: sql or f"({new['n']} > 0)")
        return
    original = running_step.flagged

    def flagged(form: running.Running, new: Any, groups: int) -> Any:
        if not isinstance(form, guard):
            return original(form, new, groups)
        if flag == "never":
            return np.zeros(groups, bool)
        return new["n"].to_numpy(zero_copy_only=False) > 0

    monkeypatch.setattr(running_step, "flagged", flagged)


@pytest.mark.parametrize("path", ["in_memory", "statements"])
@pytest.mark.parametrize("guard", [running.FloatSum, running.Extreme])
def test_a_guard_that_never_flags_is_caught(
    guard: type, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sabotaged(monkeypatch, guard, path, "never")
    test = (test_values_out_of_the_exact_range_read_their_group if guard is running.FloatSum
            else test_deleting_the_extreme)
    with pytest.raises(AssertionError):
        test()


@pytest.mark.parametrize("path", ["in_memory", "statements"])
def test_a_guard_that_always_flags_is_caught(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every touched group recomputed: still right (the harness passes), but the counts show.
    _sabotaged(monkeypatch, running.Extreme, path, "always")
    with pytest.raises(AssertionError, match=r"\(\d+, \(5\.0, 3\.0, 1\)\)"):
        test_deleting_the_extreme()


@pytest.mark.parametrize("test", [
    "test_deleting_the_extreme", "test_values_out_of_the_exact_range_read_their_group",
    "test_real_arguments_sum_as_double",
])
def test_the_statements_alone_give_the_same(test: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The edge cases above run the in-memory step (embedded, arranged); the statements
    # that step where it cannot decide must hold them too.
    _in_statements(monkeypatch)
    globals()[test]()
