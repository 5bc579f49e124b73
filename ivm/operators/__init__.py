"""Incremental operators: one module per operator kind, holding its plan node, its
(row, weight) meaning, the state it keeps and its incremental rule
(``ivm.operators.base`` is the interface, ``ivm.operators.registry`` the list).
"""
