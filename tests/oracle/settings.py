"""Hypothesis settings shared by the random-CDC test files, and the two profiles of the suite.

One example per test by default (each example is a whole workload of epochs),
derandomized so CI sees the same workloads every run, no example database, and no
shrinking (a failure still prints every epoch drawn; shrinking a long workload takes
minutes).

**Profiles.** ``make test`` runs the default profile; ``make test-deep`` sets
``IVM_TEST_DEEP=1``, the deep profile: tests marked ``deep`` run too (they are skipped,
saying so, by default: the rest of a sampled family, e.g. every fault point beyond one
of each kind), and the random-CDC tests draw more workloads (``examples``) and run each
to its end (``shortened``: ``make test`` runs their first epochs).
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


def examples(n: int) -> int:
    """The example count of a random-CDC test written for ``n`` workloads: half of them (at
    least one) in ``make test``, ``DEEP_EXAMPLES`` × ``n`` in the deep profile. Derandomized,
    the examples ``make test`` runs are the deep profile's first ones."""
    return DEEP_EXAMPLES * n if DEEP else max(1, n // 2)


def shortened(epochs: int, reopen_every: int = 0) -> int:
    """The epochs ``make test`` runs of a workload written for ``epochs``: about half (at
    least two), and one past the first reopen; all of them in the deep profile. Draws are
    made in order, so they are the full workload's first epochs."""
    if DEEP:
        return epochs
    short = max(2, (epochs + 1) // 2)
    if reopen_every:
        short = max(short, reopen_every + 1)
    return min(epochs, short)


RANDOM_CDC = settings(
    max_examples=examples(1),
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    phases=(Phase.generate,),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
