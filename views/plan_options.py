"""Session options that choose how views are planned, and the hints that override them.

``join_plan`` and ``aggregate_plan`` are both a session property naming one of a few
plans (views planned while it is set take it) and a hint comment right after a
``SELECT`` of the view's query, written as Spark's and Oracle's hints are
(``SELECT /*+ wcoj */ …``), which holds whatever the option is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ivm.errors import IvmError


def hinted(sql: str, hints: Mapping[str, str], default: str) -> str:
    """The plan a hint in ``sql`` asks for (``hints``: hint word → plan), else ``default``."""
    words = "|".join(re.escape(h) for h in sorted(hints, key=len, reverse=True))
    found = re.search(rf"/\*\+\s*({words})\s*\*/", sql, re.IGNORECASE)
    return hints[found.group(1).lower()] if found else default


def option_property(name: str, choices: Sequence[str], default: str, doc: str) -> property:
    """A session property ``name`` holding one of ``choices`` (``default`` until set);
    setting anything else raises IvmError."""
    attribute = f"_{name}"

    def get(session: object) -> str:
        return getattr(session, attribute, default)

    def set_(session: object, plan: str) -> None:
        if plan not in choices:
            raise IvmError(f"{name} must be one of {', '.join(map(repr, choices))}, "
                           f"not {plan!r}")
        setattr(session, attribute, plan)

    return property(get, set_, doc=doc)
