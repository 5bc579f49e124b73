"""Spark epochs' independent jobs: waves of views and jobs run at once (no Spark needed)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from ivm.views.spark.concurrent_jobs import at_once, waves


def _view(name: str, *sources: str) -> Any:
    return SimpleNamespace(name=name, sources=frozenset(sources))


def test_a_view_waits_for_the_views_it_reads() -> None:
    views = [_view("a", "t"), _view("b", "a"), _view("c", "t"), _view("d", "b", "c"),
             _view("e", "u")]
    assert [[v.name for v in wave] for wave in waves(views)] == [["a", "c", "e"], ["b"], ["d"]]


def test_jobs_run_together_and_report_in_order() -> None:
    together = threading.Barrier(3, timeout=10)  # passes only if all three run at once

    def job(value: int) -> Any:
        def run() -> int:
            together.wait()
            if value == 1:
                raise ValueError("one")
            return value
        return run

    outcomes = at_once([job(0), job(1), job(2)])
    assert outcomes[0] == 0 and outcomes[2] == 2
    assert isinstance(outcomes[1], ValueError)
    assert at_once([]) == []
