"""Settings every Spark-mode test shares (the session itself is the ``spark`` fixture)."""

SPARK_PARTITIONS = 3
"""Partitions of every Spark-mode session in the tests (more than the 2 local cores)."""
