"""SQL front end: SQL text → sqlglot AST → logical plan (``ivm.plan``).

Knows SQL and sqlglot, nothing about incrementality.
"""
