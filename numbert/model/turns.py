"""Turns: the points of a forward where other work waiting for the model may go first.

A server runs everyone's batches on the same lanes (numbert.pipeline.batcher): one client's three texts of 8,192
tokens through a ModernBERT are half a minute of work, a one-sentence request a few milliseconds. A long forward is
made of many short steps, each a matrix product or a block of attention (a fraction of a second on one core);
between two of them nothing of it is in flight but its arrays. There it calls `point()`, and if its thread
`gives_way`, the hook runs: on a server's lane, the short batch waiting for the model runs to its end, its answers
go out, and the long forward goes on where it stopped, its numbers unchanged (the same products in the same
shapes; the short batch has its own arrays, numbert.model.scratch keeps each forward's temporaries apart).

    with turns.giving_way(hook):     # on this thread, from now on
        encoder.forward(ids)         # hook() at each point: before each weight product, each block of attention

The work a hook runs takes no turns of its own (its points are plain), and a thread that does not give way (every
thread outside a server's lanes) pays one thread-local lookup a point.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_hooks = threading.local()  # .hook: what this thread's points run, or None


def point() -> None:
    """A point between two steps of a forward: run this thread's hook, if it gives way (and is not already in it)."""
    hook = getattr(_hooks, "hook", None)
    if hook is None:
        return
    _hooks.hook = None  # the work the hook runs gives way to nothing
    try:
        hook()
    finally:
        _hooks.hook = hook


@contextmanager
def giving_way(hook: Callable[[], object]) -> Iterator[None]:
    """Within the block, every `point()` reached on this thread calls hook()."""
    previous = getattr(_hooks, "hook", None)
    _hooks.hook = hook
    try:
        yield
    finally:
        _hooks.hook = previous
