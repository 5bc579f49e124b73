"""Which mode a session runs in, asked without importing pyspark."""

from __future__ import annotations

import sys
from typing import Any


def spark_mode(session: Any) -> bool:
    """Whether ``session`` runs its epochs on Spark (a ``SparkModeSession``)."""
    module = sys.modules.get("ivm.views.spark.session")
    return module is not None and isinstance(session, module.SparkModeSession)
