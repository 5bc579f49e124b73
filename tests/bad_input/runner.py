"""Running one corpus case and checking what it must hold, for the embedded corpus and its
Spark-mode sample alike."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any

import pytest

import ivm
from bad_input.cases import Case
from bad_input.unchanged import State, assert_unchanged, capture

GENERATED = re.compile(r"LINE \d+:|__ivm_\w+|__e\.|__c\b|SUM\(\"__w\"\)")
"""What only ivm's own SQL holds: DuckDB's excerpt of a statement, internal names."""

LONGEST_MESSAGE = 2_000
"""A message quotes the user's values and names, never a megabyte of them."""


def invoke(db: Any, case: Case) -> Any:
    """Call the case's entry point on ``db``."""
    args, kwargs = case.arguments()
    if case.call == "setattr":
        return setattr(db, *args)
    return getattr(db, case.call)(*args, **kwargs)


def check_message(case: Case, message: str) -> None:
    """The message names what the case's words say, and nothing of ivm's own SQL."""
    flat = " ".join(message.split())
    for word in case.words:
        assert word.lower() in flat.lower(), f"{word!r} not in the message: {flat[:500]}"
    rest = message
    for word in case.words:  # the user's own names may look like ivm's
        rest = rest.replace(word, "").replace(word.strip("'"), "")
    assert not GENERATED.search(rest), f"generated SQL in the message: {message[:500]}"
    assert len(message) < LONGEST_MESSAGE, f"message of {len(message)} characters"


def check_error(case: Case, error: BaseException) -> None:
    """The error's class is the case's (never an InternalError), its message as above."""
    assert isinstance(error, case.error), f"{type(error).__name__}: {error}"
    assert not isinstance(error, ivm.InternalError), str(error)
    check_message(case, str(error))


def rejects_and_keeps(db: Any, case: Case, before: State | None = None) -> State:
    """The case raises its error on ``db`` and leaves every table, view and the epoch as
    they were (``before``: captured now if not given); returns the state."""
    before = before or capture(db)
    with pytest.raises(ivm.IvmError) as raised:
        invoke(db, case)
    check_error(case, raised.value)
    return assert_unchanged(db, before)


def params(corpus: Sequence[Case], sample: Collection[str]) -> list[Any]:
    """``corpus`` as pytest parameters: an xfail case strictly expected to fail, and every
    case outside ``sample`` in the deep profile only."""
    found = []
    for case in corpus:
        marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
        if case.id not in sample:
            marks.append(pytest.mark.deep)
        found.append(pytest.param(case, id=case.id, marks=marks))
    return found
