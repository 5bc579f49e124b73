"""Incremental circuits: ``incrementalize`` turns a plan into a ``Circuit`` of operators."""
