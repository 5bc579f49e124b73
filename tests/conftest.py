"""Makes the test helpers importable as top-level packages (``from oracle.harness import …``),
and gives Spark-mode tests one shared local SparkSession (``spark``).

The project root goes on ``sys.path`` too: with ``tests/`` on the path, the test
folders ``tests/ivm`` & co. (no ``__init__.py``) would otherwise be found as
namespace packages named ``ivm``… whenever pytest runs without the root on the
path (e.g. ``.venv/bin/pytest`` from another directory). A regular package
anywhere on the path wins over a namespace package. ``benchmarks/`` goes last on the path,
for ``tpch_workload`` and ``tpch_refresh``, the TPC-H data and batches that the benchmark
and ``test_tpch.py`` share.

Tests marked ``deep`` (``pytest.mark.deep``) belong to the deep profile only: ``make test``
reports them skipped, with the reason; ``make test-deep`` (``IVM_TEST_DEEP=1``) runs them
(see ``oracle/settings.py``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
for folder in (str(TESTS.parent), str(TESTS)):
    if folder not in sys.path:
        sys.path.insert(0, folder)
if str(TESTS.parent / "benchmarks") not in sys.path:
    sys.path.append(str(TESTS.parent / "benchmarks"))


from oracle.settings import DEEP, DEEP_REASON  # noqa: E402 - needs the paths above
from oracle.spark import SPARK_PARTITIONS  # noqa: E402

GROUP_MARK = "pytestmark = pytest.mark.xdist_group("
"""How a module asks for one worker (``--dist loadgroup``): its module fixtures are
worth making once."""


@functools.cache
def _grouped(module: str) -> bool:
    """Whether the test module at ``module`` (a path from the root) marks itself a group."""
    path = TESTS.parent / module
    return path.is_file() and GROUP_MARK in path.read_text()


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``, its groups restored: pytest-xdist 3.8 tags a grouped test by
    rewriting ``item._nodeid``, which pytest 9 no longer reads, so every group was
    spread over both workers and each made the module's fixtures (a Spark session's DDL
    and first epoch: 20 s) twice. Here a module that marks itself a group is one scope;
    every other test is its own, as loadgroup schedules them."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if _grouped(module) else super()._split_scope(nodeid)

    return ModuleGroups(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Outside the deep profile, every test marked ``deep`` is skipped, saying why."""
    if DEEP:
        return
    skip = pytest.mark.skip(reason=DEEP_REASON)
    for item in items:
        if item.get_closest_marker("deep") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark for the whole run: 2 cores, and up to 4 attempts per task.

    (Plain ``local[2]`` never retries a failed task; the exactly-once tests need
    Spark to retry.) Python workers run this interpreter, so they import the same
    packages as the tests. The JVM compiles with C1 only and collects with one thread:
    a test's JVM lives minutes, and C2 compiling Spark's classes cost it ≈45 % of its
    CPU per epoch (3.0 → 1.6 s, measured), which both xdist workers compete for. Python
    workers are reached over Unix domain sockets (a Python stage ≈40 ms faster than
    over TCP, docs/spark.md).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,4]")
        .appName("ivm-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(SPARK_PARTITIONS))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.python.unix.domain.socket.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
