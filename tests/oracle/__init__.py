"""The DuckDB oracle: randomized CDC workloads checked against recomputation (DESIGN.md, Testing).

``harness`` holds the machinery: the workload runner, the epoch strategy and the
multiset comparisons. Tests import it as ``from oracle.harness import …`` (the
tests directory is put on ``sys.path`` by ``tests/conftest.py``).
"""
