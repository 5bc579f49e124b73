"""The process's heap (``ivm.storage.heap``): once a session is open, a block of a
megabyte that numpy allocates is mapped on its own (and unmapped when freed) even after a
larger block was freed, which is what raises glibc's own threshold; and a threshold the
environment chose is kept.

Each case runs in a fresh Python process: the threshold is a setting of the whole
process, and glibc raises it once and for all.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys

import pytest

CHILD = r"""
import ctypes, ctypes.util, sys
import numpy as np

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = Mallinfo2

how = sys.argv[1]
big = np.ones(8 << 20, dtype=np.uint8)  # mapped, and its free raises glibc's threshold
del big
if how == "call":
    from ivm.storage.heap import keep_large_blocks_mapped
    print("set" if keep_large_blocks_mapped() else "kept", file=sys.stderr)
elif how == "session":
    import ivm
    ivm.connect().close()
before = libc.mallinfo2().hblks
block = np.ones(1 << 20, dtype=np.uint8)
print(libc.mallinfo2().hblks - before)
"""


def _has_mallinfo2() -> bool:
    name = ctypes.util.find_library("c")
    return bool(name) and hasattr(ctypes.CDLL(name), "mallinfo2")


pytestmark = pytest.mark.skipif(not _has_mallinfo2(),
                                reason="glibc's heap (mallinfo2) only")


def _mapped_blocks(how: str, **environment: str) -> tuple[int, str]:
    """Blocks glibc mapped for one 1 MB array after an 8 MB one was freed, and what the
    child said of the threshold, in a fresh process with ``environment`` added."""
    env = {name: value for name, value in os.environ.items()
           if name != "MALLOC_MMAP_THRESHOLD_" and name != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", CHILD, how], capture_output=True,
                          text=True, timeout=120, check=True, env={**env, **environment})
    return int(done.stdout.strip()), done.stderr.strip()


def test_without_it_glibc_serves_a_megabyte_from_the_heap() -> None:
    assert _mapped_blocks("nothing")[0] == 0  # the premise: the threshold rose to 8 MB


def test_once_set_a_megabyte_is_mapped_and_given_back_when_freed() -> None:
    assert _mapped_blocks("call") == (1, "set")


def test_opening_a_session_sets_it() -> None:
    assert _mapped_blocks("session")[0] == 1


def test_a_threshold_the_environment_chose_is_kept() -> None:
    blocks, said = _mapped_blocks("call", MALLOC_MMAP_THRESHOLD_=str(64 << 20))
    assert (blocks, said) == (0, "kept")
    blocks, said = _mapped_blocks(
        "call", GLIBC_TUNABLES=f"glibc.malloc.mmap_threshold={64 << 20}")
    assert (blocks, said) == (0, "kept")
