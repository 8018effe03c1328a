"""Scratch memory: the temporary arrays of one encoder layer, handed on to the next layer.

Every layer makes the same temporaries in the same order, and fresh memory costs a page fault per
4 KiB, zeroed by the kernel: reusing them saves those (docs/performance.md). Only a
function's own temporaries come from here (`scratch_array`); whatever a public function returns is
fresh memory or the `out` array its caller passed, so nothing a caller keeps is overwritten later.

    scratch = Scratch()
    for layer in layers:
        with scratch:  # the arrays the previous layer took, taken again in the same order
            ...
"""

from __future__ import annotations

import threading

import numpy as np


class Scratch:
    """A pool of float32 arrays taken in order, reused from one `with scratch:` to the next."""

    active = threading.local()  # the Scratch in use on this thread, if any

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self.taken = 0
        self.outer: Scratch | None = None

    def __enter__(self) -> None:
        self.outer = getattr(Scratch.active, "scratch", None)
        Scratch.active.scratch, self.taken = self, 0

    def __exit__(self, *exc: object) -> None:
        Scratch.active.scratch = self.outer

    def take(self, shape: tuple[int, ...]) -> np.ndarray:
        """The array taken at this point of the previous round, if it had this shape, else a new one."""
        i, self.taken = self.taken, self.taken + 1
        if i == len(self.arrays):
            self.arrays.append(np.empty(shape, np.float32))
        elif self.arrays[i].shape != shape:
            self.arrays[i] = np.empty(shape, np.float32)
        return self.arrays[i]


def scratch_array(*shape: int) -> np.ndarray:
    """A float32 temporary, uninitialised: reused within `with scratch:`, else new. Never return one."""
    scratch = getattr(Scratch.active, "scratch", None)
    return np.empty(shape, np.float32) if scratch is None else scratch.take(shape)
