"""The SQL fuzzer: random valid DuckDB queries maintained as views through random CDC
epochs (``generator``, ``driver``, ``campaign``; ``make fuzz N=…``)."""
