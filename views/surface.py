"""The parts of ``Session`` users meet beyond DDL, ingest and reads, gathered in one base
class so ``views/session.py`` stays short: changefeeds, sinks and exactly-once epochs
(``views.outside``), explain (``views.explaining``), check (``views.checking``), ALTER
TABLE (``views.altering``), streamed loads (``views.loading``), stats
(``views.stats``) and a second reader (``views.serving``)."""

from __future__ import annotations

from ivm.views.altering import Altering
from ivm.views.checking import Checking
from ivm.views.explaining import Explaining
from ivm.views.loading import Loading
from ivm.views.outside import Outside
from ivm.views.serving import Serving
from ivm.views.stats import Stats


class Surface(Outside, Explaining, Checking, Altering, Loading, Stats, Serving):
    """The mixins above, in the order their methods are looked up."""
