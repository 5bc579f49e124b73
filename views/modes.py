"""Which mode a session runs in, asked without importing pyspark."""

from __future__ import annotations

from typing import Any


def spark_mode(session: Any) -> bool:
    """Whether ``session`` runs its epochs on Spark (its engine is a ``SparkEngine``)."""
    return session._engine.mode == "spark"
