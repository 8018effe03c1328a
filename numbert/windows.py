"""Texts longer than the model: run them as overlapping windows, then average each token's states back.

The vocabulary: a long text's content tokens (those between [CLS] and [SEP]) are cut into windows of
`size` tokens, each window a span [start, end) sharing `stride` tokens with the next; each window runs
through the encoder as [CLS] span [SEP]; each content token's states are the mean over the windows that
contain it, [CLS]'s and [SEP]'s the mean over all windows. So every token of a long text gets a vector.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from .model import Encoder, Output


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
    return total / count[:, None]


def run_windows(encoder: Encoder, encoding, size: int, stride: int, batch_size: int) -> Output:
    """Run an untruncated single-text encoding ([CLS] content [SEP]) as windows of `size` tokens,
    [CLS] and [SEP] included, `batch_size` windows at a time, and stitch them into one Output."""
    cls, content, sep = encoding.ids[0], encoding.ids[1:-1], encoding.ids[-1]
    spans = window_spans(len(content), size - 2, stride)

    def window_states() -> Iterator[tuple[int, np.ndarray]]:  # (start, (layers + 1, window length, hidden))
        for b in range(0, len(spans), batch_size):
            batch = spans[b : b + batch_size]
            ids, mask = _pad([[cls, *content[s:e], sep] for s, e in batch], encoder.config.pad_token_id)
            hidden_states = encoder.forward(ids, None, mask).hidden_states
            for r, (s, e) in enumerate(batch):
                yield s, hidden_states[:, r, : e - s + 2]

    hidden_states = average_windows(window_states(), len(content))  # (layers + 1, seq, hidden)
    ids = np.asarray(encoding.ids, np.int64)
    return Output(
        ids,
        np.zeros_like(ids),
        np.ones_like(ids),
        hidden_states,
        encoder.pool(hidden_states[-1]),
        tokens=list(encoding.tokens),
        encodings=[encoding],
    )


def _pad(rows: Sequence[Sequence[int]], fill: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of different lengths -> (batch, longest) int64 array right-padded with `fill`, and its mask."""
    array = np.full((len(rows), max(map(len, rows))), fill, np.int64)
    mask = np.zeros(array.shape, np.int64)
    for r, row in enumerate(rows):
        array[r, : len(row)], mask[r, : len(row)] = row, 1
    return array, mask
