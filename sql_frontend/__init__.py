"""SQL front end: SQL text → sqlglot AST → logical plan (``ivm.plan``).

Knows SQL and sqlglot, nothing about incrementality.

* ``statements``: a script's DDL (CREATE TABLE / VIEW, DROP), each view with its
  query's own text and where that text starts in the script (``CreateView.origin``);
* ``planner``: a view's query as a logical plan (``plan_query``);
* ``rules``: the sqlglot optimizer rules the planner runs first, in one tuple;
* ``parsing``: tokenizing and parsing with positioned, plain-text errors, and
  sqlglot's logging kept quiet during ivm's own calls;
* ``positions`` and ``anchors``: where a construct is in the user's script, for errors;
* ``duckdb_aggregates``: the names of DuckDB's aggregate functions.
"""
