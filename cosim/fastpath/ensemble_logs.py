"""The logs of an ensemble's members, kept member-major.

The ensemble step function logs a row of every member's values per tick. Written straight
into a ``(ticks, N)`` array, each member's log is a column strided by a row (8 kB at 1,000
members): every reducer then reads one value per cache line, and every tick's row goes to
memory the caches do not hold. Here the rows go into a small ``(BLOCK, N)`` buffer (kept in
cache), copied every :data:`BLOCK` ticks into the ``(N, ticks)`` array that each member's
log is a contiguous row of.

The ``(N, ticks)`` arrays are large (80 MB for 1,000 members over 10,000 ticks) and made anew
for every ensemble. numpy advises the kernel to back an array of 4 MB or more with huge pages;
where the kernel then compacts memory on the fault (``transparent_hugepage/defrag`` =
``madvise``, the common default), a process whose memory is fragmented (after many small runs,
say: a sweep's one-by-one runs) waits ~0.13 s on that fault instead of ~0.03 s. These arrays
are mapped without that advice (:func:`_mapped`): their faults never wait for compaction.
"""

from __future__ import annotations

import mmap

import numpy as np

__all__ = ["BLOCK", "MemberLogs"]

#: Rows of the buffer each logged column is written into between two copies (a power of 2).
BLOCK = 64


class MemberLogs:
    """Each logged column of an ensemble's tasks, one row of ``(N, rows)`` per member.

    Parameters
    ----------
    columns : list of list
        Per task, its logged columns (:attr:`cosim.run.logstore.LogStore.columns`).
    rows : int
        Most rows a task logs (ticks of the run).
    n : int
        Members.

    Attributes
    ----------
    full : list of list of ndarray
        ``full[task][column]``, shape ``(N, rows)``: member ``m``'s log is ``[m]``.
    blocks : list of list of ndarray
        ``blocks[task][column]``, shape ``(BLOCK, N)``: the step function writes row ``r``
        of a task into row ``r % BLOCK`` and calls :meth:`flush` after the block's last.
    """

    def __init__(self, columns: list, rows: int, n: int):
        self.full = [[_mapped(n, rows) for _ in cols] for cols in columns]
        self.blocks = [[np.empty((BLOCK, n)) for _ in cols] for cols in columns]

    def flush(self, task: int, r: int) -> None:
        """Copy the rows of ``task``'s block up to row ``r`` (of the run) into its members'
        logs."""
        first = r - r % BLOCK
        for full, block in zip(self.full[task], self.blocks[task]):
            full[:, first:r + 1] = block[:r + 1 - first].T

    def close(self, rows: list[int]) -> None:
        """Copy what the blocks hold after the last full block: ``rows[task]`` rows
        logged."""
        for task, count in enumerate(rows):
            if count % BLOCK:
                self.flush(task, count - 1)


#: Arrays from this size on are mapped by :func:`_mapped` (numpy's own threshold for its
#: huge-page advice).
MAPPED_FROM = 4 << 20


def _mapped(n: int, rows: int) -> np.ndarray:
    """An uninitialized float64 array of shape ``(n, rows)``: anonymous memory mapped on its
    own, without huge-page advice, when large (see the module notes), else ``np.empty``."""
    size = n * rows * 8
    if size < MAPPED_FROM:
        return np.empty((n, rows))
    # (the array holds the map: unmapped when the last view of it goes). Populated when the
    # map is made where the system can (Linux): one call instead of a fault per page, half
    # the time in a virtual machine; every page is written anyway.
    mapped = mmap.mmap(-1, size, flags=_FLAGS) if _FLAGS else mmap.mmap(-1, size)
    return np.frombuffer(mapped, dtype=np.float64).reshape(n, rows)


_FLAGS = (mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE) \
    if hasattr(mmap, "MAP_POPULATE") else 0
