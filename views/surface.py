"""The parts of ``Session`` users meet beyond DDL, ingest and reads, gathered in one base
class so ``views/session.py`` stays short: changefeeds, sinks and exactly-once epochs
(``views.outside``), explain (``views.explaining``), check (``views.checking``), ALTER
stats (``views.stats``) and a second reader (``views.serving``). ALTER TABLE
(``views.altering``) and streamed loads (``views.loading``) are functions of the session."""

from __future__ import annotations

from typing import Self

from ivm.views.checking import Checking
from ivm.views.explaining import Explaining
from ivm.views.outside import Outside
from ivm.views.serving import Serving
from ivm.views.stats import Stats


class Surface(Outside, Explaining, Checking, Stats, Serving):
    """The mixins above, in the order their methods are looked up; and ``with`` closes."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # type: ignore[attr-defined]  # Session's
