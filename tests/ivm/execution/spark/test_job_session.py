"""ivm's own Spark session (``ivm.execution.spark.job_session``): the user's settings, AQE
off, the user's session untouched, the user's DataFrames moved in."""

from __future__ import annotations

from typing import Any

from ivm.execution.spark.job_session import JobSession

AQE = "spark.sql.adaptive.enabled"
ZONE = "spark.sql.session.timeZone"


def test_settings_follow_the_user_except_adaptive_execution(spark: Any) -> None:
    before = spark.conf.get(ZONE)
    jobs = JobSession(spark)
    try:
        assert jobs.spark.conf.get(AQE) == "false"
        assert spark.conf.get(AQE) == "true"  # the user's session keeps its own
        spark.conf.set(ZONE, "Asia/Tokyo")
        jobs.sync()
        assert jobs.spark.conf.get(ZONE) == "Asia/Tokyo"
        spark.conf.set(AQE, "true")
        jobs.sync()
        assert jobs.spark.conf.get(AQE) == "false"
    finally:
        spark.conf.set(ZONE, before)


def test_a_users_dataframe_is_adopted_with_its_rows(spark: Any) -> None:
    jobs = JobSession(spark)
    spark.range(5).createOrReplaceTempView("ivm_test_numbers")
    frame = spark.sql("SELECT id * 2 AS twice FROM ivm_test_numbers WHERE id > 1")
    adopted = jobs.adopt(frame)
    assert adopted.sparkSession is jobs.spark
    assert sorted(r.twice for r in adopted.collect()) == [4, 6, 8]
    assert jobs.adopt(adopted) is adopted
