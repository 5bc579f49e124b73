"""The Spark session ivm runs its epochs in: the user's SparkContext, a SQL conf of its own.

An epoch's plan is a chain of small shuffle stages (a change hashed to each stage's
partitions). Adaptive query execution (AQE), on by default, re-plans a query after each
shuffle stage and runs each stage as a job of its own: for such a plan that costs
≈90 ms an epoch on ``local[2]`` (measured: 0.84 s against 0.75 s for an epoch of one
row through five views) and buys nothing, a change's partitions being small and balanced
by the key hash already. So ivm builds its plans in ``spark.newSession()``: the same
SparkContext (executors, Python workers, Hadoop settings), with a SQL conf that is the
user's, copied before each epoch, except that AQE is off. The user's session, its conf
and its catalog (where ivm registers tables and views) are left as they are.

A DataFrame the user passes as a batch belongs to the user's session; ``adopt`` moves
its (analyzed) plan into ivm's session, so the epoch's one plan has one conf.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

OWN_CONF = {"spark.sql.adaptive.enabled": "false"}
"""What ivm's session sets differently from the user's."""


class JobSession:
    """ivm's own session beside the user's (see the module docstring)."""

    def __init__(self, user: SparkSession) -> None:
        self.user = user
        self.spark = user.newSession()
        self._copied: dict[str, str] = {}
        self._version: str | None = None
        self.sync()

    def sync(self) -> None:
        """Give ivm's session every SQL setting of the user's that changed since the last
        sync (those a session may change), then ivm's own. (The settings are compared as
        one text first, one Py4J call: reading them one by one costs ≈15 ms.)"""
        version = str(self.user.conf._jconf.getAllAsJava().toString())  # noqa: SLF001
        if version == self._version:
            return
        self._version = version
        current = _settings(self.user)
        changed = [k for k, v in current.items() if self._copied.get(k) != v]
        for key in changed:
            if key not in OWN_CONF and self.spark.conf.isModifiable(key):
                self.spark.conf.set(key, current[key])
        for key in self._copied.keys() - current.keys():  # unset by the user since
            if key not in OWN_CONF and self.spark.conf.isModifiable(key):
                self.spark.conf.unset(key)
        self._copied = dict(current)
        for key, value in OWN_CONF.items():
            self.spark.conf.set(key, value)

    def adopt(self, frame: DataFrame) -> DataFrame:
        """``frame`` (a DataFrame of any session of this SparkContext) in ivm's session."""
        if frame.sparkSession is self.spark:
            return frame
        jvm = self.spark._jvm  # noqa: SLF001 - the classic Dataset API has no Python wrapper
        assert jvm is not None
        plan = frame._jdf.queryExecution().analyzed()  # noqa: SLF001 - resolved in its session
        moved = jvm.org.apache.spark.sql.classic.Dataset.ofRows(self.spark._jsparkSession, plan)  # noqa: SLF001
        return ClassicDataFrame(moved, self.spark)


def _settings(spark: SparkSession) -> dict[str, str]:
    """Every SQL setting ``spark`` has set (``getAll`` is a property in classic PySpark)."""
    everything = spark.conf.getAll
    return dict(everything() if callable(everything) else everything)
