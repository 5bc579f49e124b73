"""The names of DuckDB's aggregate functions.

sqlglot parses many of them as plain (anonymous) functions, so the front end
could not otherwise tell ``product(x)`` (an aggregate) from ``upper(x)``. The
list is DuckDB's own answer to

    SELECT DISTINCT function_name FROM duckdb_functions()
    WHERE function_type = 'aggregate'

(checked against the installed DuckDB by tests/sql_frontend/test_duckdb_aggregates.py).
"""

from __future__ import annotations

DUCKDB_AGGREGATES: frozenset[str] = frozenset(
    {
        "any_value", "approx_count_distinct", "approx_quantile", "approx_top_k", "arbitrary",
        "arg_max", "arg_max_null", "arg_max_nulls_last", "arg_min", "arg_min_null",
        "arg_min_nulls_last", "argmax", "argmin", "array_agg", "avg", "bit_and", "bit_or",
        "bit_xor", "bitstring_agg", "bool_and", "bool_or", "combine_aggr", "corr", "count",
        "count_if", "count_star", "countif", "covar_pop", "covar_samp", "decimal_average",
        "entropy", "favg", "first", "fsum", "group_concat", "histogram", "histogram_exact",
        "kahan_sum", "kurtosis", "kurtosis_pop", "last", "list", "listagg", "lttb", "mad", "max",
        "max_by", "mean", "median", "min", "min_by", "mode", "product", "quantile",
        "quantile_cont", "quantile_disc", "regr_avgx", "regr_avgy", "regr_count",
        "regr_intercept", "regr_r2", "regr_slope", "regr_sxx", "regr_sxy", "regr_syy",
        "reservoir_quantile", "sem", "skewness", "stddev", "stddev_pop", "stddev_samp",
        "string_agg", "sum", "sum_no_overflow", "sumkahan", "var_pop", "var_samp", "variance",
        "variant_group_object",
    }
)
"""Every aggregate function name DuckDB knows (lower case), aliases included."""
