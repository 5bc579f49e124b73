"""Hypothesis settings shared by the random-CDC test files.

One example per test by default (each example is a whole workload of epochs),
derandomized so CI sees the same workloads every run, no example database, and no
shrinking (a failure still prints every epoch drawn; shrinking a long workload takes
minutes).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

RANDOM_CDC = settings(
    max_examples=1,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    phases=(Phase.generate,),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
