# `make demo` / `make test` work on a fresh clone: they create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-deep lint bench bench-spark bench-tpch fuzz test-slt clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/quickstart.py

# Two pytest workers: Spark-mode tests mostly wait on the JVM, so two halve the wall time.
# --dist loadgroup: a module marked xdist_group (module-scoped fixtures worth making once)
# runs on one worker; every other test goes to whichever worker is free.
# `make test` is the default profile (≤ 12 minutes on the 2-core machine): one example of
# each family sampled (a fault point of each kind, bad inputs of each entry point, …) and
# short random workloads. `make test-deep` (IVM_TEST_DEEP=1) runs every test marked `deep`
# too (every fault point and bad input, the real Spark cluster) and more, longer random
# workloads (docs/testing.md, Profiles).
test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup

test-deep: $(STAMP)
	IVM_TEST_DEEP=1 $(BIN)/python -m pytest -n 2 --dist loadgroup

lint: $(STAMP)
	$(BIN)/ruff check ivm sql_frontend storage views tests examples benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_aggregate.py

bench-spark: $(STAMP)
	$(BIN)/python benchmarks/bench_spark.py

# TPC-H refresh benchmark: `make bench-tpch TPCH_SF=0.1` (data cached in benchmarks/.data/).
TPCH_SF ?= 1
bench-tpch: $(STAMP)
	$(BIN)/python benchmarks/bench_tpch.py --sf $(TPCH_SF)

# The SQL fuzzer: `make fuzz N=500` (or MINUTES=10; SEED=s to repeat a run), tally printed,
# failures written to fuzz-report.txt.
fuzz: $(STAMP)
	$(BIN)/python tests/fuzz/campaign.py $(if $(N),--n $(N)) $(if $(MINUTES),--minutes $(MINUTES)) $(if $(SEED),--start $(SEED))

# SQLite's sqllogictest queries as maintained views (tests/slt/corpus); outside `make test`.
# EVERY=n runs every n-th query of each script, MINUTES=m caps each script's time;
# failures written to slt-report.txt.
EVERY ?= 4
test-slt: $(STAMP)
	$(BIN)/python tests/slt/runner.py --every $(EVERY) $(if $(MINUTES),--minutes $(MINUTES))

clean:
	rm -rf $(VENV)
