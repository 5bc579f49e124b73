"""Makes the test helpers importable as top-level packages (``from oracle.harness import …``).

The project root goes on ``sys.path`` too: with ``tests/`` on the path, the test
folders ``tests/ivm`` & co. (no ``__init__.py``) would otherwise be found as
namespace packages named ``ivm``… whenever pytest runs without the root on the
path (e.g. ``.venv/bin/pytest`` from another directory). A regular package
anywhere on the path wins over a namespace package.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
for folder in (str(TESTS.parent), str(TESTS)):
    if folder not in sys.path:
        sys.path.insert(0, folder)
