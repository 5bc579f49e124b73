"""How ``tests/slt/corpus/`` was cut from SQLite's sqllogictest scripts (run once, by hand).

    python tests/slt/curate.py /path/to/sqllogictest/test

The corpus is a selection of SQLite's sqllogictest test scripts (the ``test/`` folder of
the sqllogictest repository), with their expected results removed (the runner's oracle
is DuckDB itself, never the recorded SQLite answers) and gzipped. The large generated
scripts (random/*, index/*: 4,000–15,000 queries each) keep every statement and every
10th query; the hand-written ones (select1–5, evidence/*) are kept whole. No code of
sqllogictest is copied: only these test scripts, as data.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slt.parser import strip_results

CORPUS = Path(__file__).resolve().parent / "corpus"

SELECTION: dict[str, int] = {
    "select1.test": 1,
    "select2.test": 1,
    "select3.test": 1,
    "select4.test": 1,
    "select5.test": 1,
    "evidence/in1.test": 1,
    "evidence/in2.test": 1,
    "evidence/slt_lang_aggfunc.test": 1,
    "random/aggregates/slt_good_0.test": 10,
    "random/expr/slt_good_0.test": 10,
    "random/groupby/slt_good_0.test": 10,
    "random/select/slt_good_0.test": 10,
    "index/between/10/slt_good_1.test": 10,
    "index/commute/10/slt_good_0.test": 10,
    "index/delete/10/slt_good_0.test": 10,
    "index/in/10/slt_good_3.test": 10,
    "index/orderby/10/slt_good_0.test": 10,
    "index/orderby_nosort/10/slt_good_0.test": 10,
    "index/random/10/slt_good_0.test": 10,
    "index/view/10/slt_good_1.test": 10,
}
"""Script (relative to sqllogictest's test/) -> keep every n-th query."""


def corpus_name(script: str) -> str:
    """``random/expr/slt_good_0.test`` -> ``random-expr-slt_good_0.test.gz``."""
    return script.replace("/", "-") + ".gz"


def main(source: Path) -> None:
    CORPUS.mkdir(exist_ok=True)
    for script, every in SELECTION.items():
        text = strip_results((source / script).read_text(encoding="utf-8"), every)
        data = gzip.compress(text.encode(), compresslevel=9, mtime=0)
        (CORPUS / corpus_name(script)).write_bytes(data)
        print(f"{script}: every {every}, {len(data):,} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
