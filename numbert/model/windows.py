"""Texts longer than the model: run them as overlapping windows, then average each token's states back.

The vocabulary: a long text's content tokens (those between [CLS] and [SEP]) are cut into windows of
`size` tokens, each window a span [start, end) sharing `stride` tokens with the next; each window runs
through the encoder as [CLS] span [SEP]; each content token's states are the mean over the windows that
contain it, [CLS]'s and [SEP]'s the mean over all windows. So every token of a long text gets a vector.
numbert.pipeline.planner runs the windows (`run_windows`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

STRIDE = 128  # tokens neighbouring windows share, unless asked otherwise (`stride_or_default`)


def stride_or_default(stride: int | None, size: int) -> int:
    """`stride`, or for None the default: STRIDE tokens, or half the window where a window of `size` tokens holds no
    more than STRIDE (a model of 128 tokens shares 63 of the 126 between its [CLS] and [SEP])."""
    if stride is not None:
        return stride
    return STRIDE if STRIDE < size else size // 2


def window_spans(n_tokens: int, size: int, stride: int) -> list[tuple[int, int]]:
    """[start, end) spans of windows of `size` tokens over `n_tokens`, neighbours sharing `stride` tokens.

    The last window ends exactly at n_tokens (it may be shorter), so every token is covered.
    """
    if size < 1:
        raise ValueError(f"window size must be at least 1 token, got {size}")
    if not 0 <= stride < size:
        raise ValueError(f"stride (the overlap between windows) must be in [0, {size}), got {stride}")
    spans, start = [], 0
    while True:
        end = min(start + size, n_tokens)
        spans.append((start, end))
        if end >= n_tokens:
            return spans
        start += size - stride


def average_windows(windows: Iterable[tuple[int, np.ndarray]], n_tokens: int) -> np.ndarray:
    """Stitch the states of overlapping windows into one sequence, averaging where they overlap.

    Each window is (start, states) with states (..., 1 + length + 1, hidden): [CLS], the content
    tokens start .. start + length of the long text, [SEP]. The result is (..., 1 + n_tokens + 1,
    hidden): [CLS] and [SEP] averaged over all windows, each content token over the windows that
    contain it.
    """
    total, count = None, np.zeros(n_tokens + 2, np.float32)
    for start, states in windows:
        if total is None:
            total = np.zeros((*states.shape[:-2], n_tokens + 2, states.shape[-1]), np.float32)
        length = states.shape[-2] - 2
        total[..., 0, :] += states[..., 0, :]
        total[..., 1 + start : 1 + start + length, :] += states[..., 1:-1, :]
        total[..., -1, :] += states[..., -1, :]
        count[[0, -1]] += 1
        count[1 + start : 1 + start + length] += 1
    if total is None:
        raise ValueError("no windows to average")
    total /= count[:, None]  # in place: a long text's states are held once
    return total
