"""``LATERAL f(…) AS a``: a table function or UNNEST after the keyword LATERAL is the same
FROM item without it (``lateral.plain_lateral_functions``); ``WITH ORDINALITY`` after
LATERAL is refused by name (tests/sql_frontend/test_refusal_sites.py). Random CDC
against DuckDB's recomputation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.harness import run_workload
from oracle.settings import RANDOM_CDC, examples
from test_unnest import DOCS, DOMAINS

VIEWS = {
    "lateral_unnest": "SELECT d.id, u.tag FROM docs d, LATERAL unnest(d.tags) AS u(tag)",
    "lateral_series": "SELECT d.id, g.i FROM docs d CROSS JOIN LATERAL "
                      "generate_series(1, d.n) AS g(i)",
    "lateral_left_range": "SELECT d.id, r.x FROM docs d LEFT JOIN LATERAL range(d.n) AS r(x) "
                          "ON r.x > 0",
}


@settings(RANDOM_CDC, max_examples=examples(2))
@given(data=st.data())
def test_lateral_table_functions_under_random_cdc(data: st.DataObject) -> None:
    run_workload([DOCS], VIEWS, data, epochs=6, domains=DOMAINS)
