"""Exactly-once from outside: ``ingest(..., epoch=N)`` and the deltas of the last few epochs.

A streaming source numbers its batches (Kafka offsets, Spark's batch ids). It
passes that number as ``epoch=``, and the session applies each number once:

* ``N == db.epoch + 1``: the batch is applied as epoch N (even an empty one);
* ``N <= db.epoch``: already applied, a no-op that returns the deltas that
  epoch returned, kept in memory for the last ``KEPT_EPOCHS`` epochs (an empty
  dict, with an ``IvmWarning``, for an older epoch or one applied before this
  session opened);
* ``N > db.epoch + 1``: a gap, ``EpochError``: an epoch between was never applied.

Without ``epoch=`` every call with rows is the next epoch; a call whose batches
hold no rows at all is a no-op that leaves the epoch where it is (deltas all
empty).
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import pyarrow as pa

from ivm.errors import EpochError, IvmWarning

KEPT_EPOCHS = 8
"""How many epochs' deltas a session keeps for replays of ``ingest(..., epoch=N)``."""


class EpochLedger:
    """The deltas of the last few epochs applied, by epoch (see the module docstring)."""

    def __init__(self, kept: int = KEPT_EPOCHS) -> None:
        self.kept = kept
        self._deltas: OrderedDict[int, dict[str, pa.Table]] = OrderedDict()
        self._bytes: dict[int, int] = {}  # each kept epoch's deltas' bytes

    def replay(self, epoch: int | None, current: int) -> dict[str, pa.Table] | None:
        """None when the batch is to be applied; else the deltas of the epoch it repeats.

        Raises ``EpochError`` for an epoch that is not a positive integer, or one past
        the next (a gap)."""
        if epoch is None:
            return None
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            raise EpochError(f"epoch must be a positive integer, not {epoch!r}")
        if epoch == current + 1:
            return None
        if epoch > current + 1:
            raise EpochError(
                f"epoch {epoch} cannot be applied: the state is at epoch {current}, so the "
                f"next is {current + 1} (epochs {current + 1}..{epoch - 1} were never applied)"
            )
        deltas = self._deltas.get(epoch)
        if deltas is None:
            warnings.warn(
                f"ivm: epoch {epoch} was applied already (the state is at epoch {current}): "
                f"nothing is done; its deltas are no longer kept (only the last {self.kept} "
                "epochs this session applied are), so an empty dict is returned",
                IvmWarning,
                stacklevel=4,
            )
            return {}
        return dict(deltas)

    def applied(self, epoch: int, deltas: dict[str, pa.Table]) -> None:
        """Keep ``deltas`` as epoch ``epoch``'s, forgetting the oldest beyond ``kept``."""
        self._deltas[epoch] = dict(deltas)
        self._bytes[epoch] = sum(t.nbytes for t in deltas.values())
        while len(self._deltas) > self.kept:
            oldest, _ = self._deltas.popitem(last=False)
            self._bytes.pop(oldest, None)

    def nbytes(self) -> int:
        """The bytes the kept deltas hold (counted against the session's memory limit)."""
        return sum(self._bytes.values())

    def forget(self) -> None:
        """Forget every kept delta (the views they name changed)."""
        self._deltas.clear()
        self._bytes.clear()
