"""Incremental operators: each module builds the DuckDB SQL of one operator's epoch.

Every module opens with the operator's meaning in (row, weight) terms and the
state it keeps. Functions here return SQL text; the executor runs it.
"""
