"""Hypothesis settings shared by the random-CDC test files, and the two profiles of the suite.

One example per test by default (each example is a whole workload of epochs),
derandomized so CI sees the same workloads every run, no example database, and no
shrinking (a failure still prints every epoch drawn; shrinking a long workload takes
minutes).

**Profiles.** ``make test`` runs the default profile; ``make test-deep`` sets
``IVM_TEST_DEEP=1``, the deep profile: tests marked ``deep`` run too (they are skipped,
saying so, by default: the rest of a sampled family, e.g. every fault point beyond one
of each kind), and ``examples(n)`` / ``epochs(n)`` give the random-CDC tests more
workloads and longer ones.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

DEEP = os.environ.get("IVM_TEST_DEEP", "") not in ("", "0")
"""The deep profile (``make test-deep``)."""

DEEP_REASON = "deep profile only: run by `make test-deep` (IVM_TEST_DEEP=1)"
"""Why a test marked ``deep`` is skipped by ``make test``."""

DEEP_EXAMPLES = 4
"""How many times more examples a random-CDC test draws in the deep profile."""


def examples(default: int, deep: int | None = None) -> int:
    """A hypothesis test's example count: ``default`` in ``make test``; ``deep`` (or
    ``DEEP_EXAMPLES`` × ``default``) in the deep profile."""
    if not DEEP:
        return default
    return deep if deep is not None else DEEP_EXAMPLES * default


def epochs(default: int, deep: int) -> int:
    """A workload's epoch count: ``default`` in ``make test``, ``deep`` in the deep profile
    (the default workload is the deep one's first epochs: draws are made in order)."""
    return deep if DEEP else default


RANDOM_CDC = settings(
    max_examples=examples(1),
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    phases=(Phase.generate,),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
