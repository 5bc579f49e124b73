"""The bad-input corpus, embedded mode: every case raises its error class, its message names
the user's table, column, view or position (never generated SQL), nothing changes (every
table and view and the epoch), and a good batch applies after it, every view then equal
to DuckDB's recomputation.

Cases of one setup share one session: the "unchanged" check is what makes that safe (a
case that left anything behind fails there, and its session is dropped). A case's state
before is the one its predecessor was checked against, unless a good batch came between:
one follows every fifth case (one table's rows, in turn), every tenth every table's and a
check of every view against DuckDB's recomputation; and the corpus ends with one.

``make test`` runs ``SAMPLE``: the first case of every entry point and error class, and
every third case of the rest; ``make test-deep`` runs every case (the rest are marked
``deep``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ivm
from bad_input import api_cases, batch_cases, cli_cases, ddl_cases
from bad_input.cases import Case, good_batch, shop_session
from bad_input.runner import check_message, invoke, params, rejects_and_keeps
from bad_input.unchanged import State, assert_unchanged, assert_views_recompute, capture
from ivm.views.cli import main

pytestmark = pytest.mark.xdist_group("bad_input_corpus")
"""Under xdist, one worker runs the module: its module-scoped fixtures are made once."""

CORPUS: list[Case] = [*batch_cases.CASES, *ddl_cases.CASES, *api_cases.CASES, *cli_cases.CASES]
_count = itertools.count(1)


def test_the_corpus_is_large_and_its_ids_unique() -> None:
    ids = [case.id for case in CORPUS]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    assert len(ids) >= 150


EVERY = 3
"""Beyond the first case of each entry point and error class, ``make test`` runs every
``EVERY``-th case of the corpus."""


def entry(case: Case) -> tuple[str, str]:
    """A case's entry point and error class."""
    return case.call, case.error.__name__


def sample(corpus: list[Case]) -> set[str]:
    """The ids of the cases ``make test`` runs (see the module docstring), and every xfail."""
    firsts = {entry(case): case.id for case in reversed(corpus)}
    return ({case.id for i, case in enumerate(corpus) if i % EVERY == 0 or case.xfail}
            | set(firsts.values()))


SAMPLE = sample(CORPUS)


def test_the_sample_has_every_entry_point_and_error_class() -> None:
    assert {entry(c) for c in CORPUS if c.id in SAMPLE} == {entry(c) for c in CORPUS}
    assert len(SAMPLE) < len(CORPUS) / 2


@pytest.fixture(scope="module")
def sessions() -> Iterator[dict[str, Any]]:
    made: dict[str, Any] = {}
    yield made
    for db in made.values():
        db.close()


STATES: dict[str, State] = {}
"""Each setup's session's state as the last case left it (checked unchanged)."""


@pytest.fixture(scope="module")
def cli_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    cli_cases.write_files(root)
    assert main(["run", str(root / "pipeline.sql"), "--state", str(root / "state"),
                 "--cdc", str(root / "good")]) == 0
    return root


def applies_good_batch(db: Any, n: int) -> None:
    """The session still works: a good batch (one table's, in turn; every tenth every
    table's, and then every view is checked against DuckDB's recomputation) advances the
    epoch."""
    epoch = db.epoch
    batch = good_batch(n)
    db.ingest(batch if n % 10 == 0 else dict([list(batch.items())[n % len(batch)]]))
    assert db.epoch == epoch + 1
    if n % 10 == 0:
        assert_views_recompute(db)


@pytest.mark.parametrize("case", params(CORPUS, SAMPLE))
def test_bad_input(case: Case, sessions: dict[str, Any], request: pytest.FixtureRequest) -> None:
    if case.setup == "cli":
        run_cli(case, request.getfixturevalue("cli_root"), request.getfixturevalue("capsys"),
                request.getfixturevalue("monkeypatch"))
    elif case.setup == "none":
        run_connect(case, request.getfixturevalue("tmp_path"))
    else:
        if case.setup not in sessions:
            sessions[case.setup], STATES[case.setup] = shop_session(), None  # type: ignore
        db = sessions[case.setup]
        try:
            STATES[case.setup] = rejects_and_keeps(db, case, STATES.get(case.setup))
            n = next(_count)
            if n % 5 == 0:
                applies_good_batch(db, n)
                STATES.pop(case.setup)
        except BaseException:
            sessions.pop(case.setup).close()  # the next case starts from a fresh session
            STATES.pop(case.setup, None)
            raise


def run_connect(case: Case, tmp_path: Path) -> None:
    """``ivm.connect`` refuses, creating and changing nothing on disk."""
    file = tmp_path / "file"
    file.write_text("not a state directory")
    args = tuple(a.format(file=file) if isinstance(a, str) else a for a in case.args)
    case = Case(case.id, case.call, args, case.error,
                tuple(w.format(file=file) for w in case.words), case.kwargs)
    with pytest.raises(ivm.IvmError) as raised:
        invoke(ivm, case)
    assert isinstance(raised.value, case.error) and not isinstance(raised.value,
                                                                   ivm.InternalError)
    check_message(case, str(raised.value))
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
    assert file.read_text() == "not a state directory"


def run_cli(case: Case, root: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ivm ARGV`` fails with one line on stderr (exit status 1; argparse's usage: 2), the
    state is unchanged, and a good batch applies to it after."""
    monkeypatch.setenv("COLUMNS", "10000")  # rich wraps at the terminal's width
    state = root / "state"
    argv = [a.format(root=root, state=state) for a in case.args]
    with ivm.connect(state) as db:
        before = capture(db)
    capsys.readouterr()
    if case.error is SystemExit:
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
    else:
        assert main(argv) == 1
    err = capsys.readouterr().err
    words = tuple(w.format(root=root, state=state) for w in case.words)
    check_message(Case(case.id, "cli", (), case.error, words), err)
    assert "Traceback" not in err
    if case.error is not SystemExit:
        assert err.startswith("ivm: error: ") and err.count("\n") == 1, err
    with ivm.connect(state) as db:
        assert_unchanged(db, before)
        n = next(_count) + 10_000
        db.ingest("orders", [{"id": 1000 + n, "customer": f"c{n % 3}", "amount": n}])
        assert db.epoch == before.epoch + 1
        assert_views_recompute(db)


def test_views_exact_after_the_corpus(sessions: dict[str, Any]) -> None:
    """After every bad input (and the good batches between), the views are exact."""
    db = sessions.get("shop") or sessions.setdefault("shop", shop_session())
    applies_good_batch(db, 10 * (next(_count) + 100_000))  # every table's, then the check
