"""Attention a block of queries at a time: exact, in the memory of one block's scores.

`layers.attention` holds every query's scores against every key at once: rows x heads x seq x seq floats,
3.2 GB for one 8,192-token text of 12 heads. Softmax treats each query's row of scores on its own, so the
queries can be taken a block at a time, each row's softmax and weighted sum of the values computed as
before: the same numbers, in the memory of one block's scores (BLOCK_BYTES).

Without a window the blocks are taken a head at a time, so each product is as large as a block allows (faster than
all the heads' thin products at once: docs/performance.md). A sliding-window layer
(ModernBERT: the keys within `window` = 64 tokens either side of the query) needs, for
the block of queries [s, e), only the keys [s - window, e + window): its scores are (e - s) x (e - s + 2 window),
the keys outside the band masked as transformers masks them, every head at once. The work and memory grow as seq x
window, not seq x seq: a band.

    attention_in_blocks(q, k, v, mask_bias, window, out=context)     # layers.attention, one block at a time

numbert.model.packing runs a group of sequences this way when its scores would exceed LONG_SCORES bytes, or its
layer has a window shorter than its sequences (and no one asked for the probabilities, which are seq x seq).
Reference: `reference.attention` with `reference.band`, the whole seq x seq at once; tests/test_reference.py
holds the two equal.
"""

from __future__ import annotations

import numpy as np

from . import turns
from .layers import attention
from .scratch import Scratch

LONG_SCORES = 64 << 20  # bytes of one group's scores above which its queries run in blocks (BERT's 512 never do)
BLOCK_BYTES = 32 << 20  # bytes of scores per block of queries (one head's, without a window)
MIN_BLOCK = 32  # queries: fewer make the products too thin to run at speed
# windows of queries per block of a band: its products compute (8 + 2) w scores a query for the band's 2w + 1, but
# there are 8 times fewer calls than with blocks of one window, and on several BLAS threads each call pays its
# threads' wake-up (docs/performance.md)
BAND_BLOCK = 8


def band(queries: int, keys: int, first_key: int, window: int) -> np.ndarray:
    """The additive mask of a sliding window: 0 where key j lies within `window` of query i, float32's minimum
    elsewhere, for queries 0 .. queries - 1 and keys first_key .. first_key + keys - 1 (positions in the
    sequence). -> (queries, keys) float32"""
    distance = np.arange(first_key, first_key + keys)[None, :] - np.arange(queries)[:, None]
    return np.where(np.abs(distance) <= window, np.float32(0), np.finfo(np.float32).min).astype(np.float32)


def is_long(rows: int, heads: int, length: int) -> bool:
    """Whether a group's scores, rows x heads x length x length floats, exceed LONG_SCORES."""
    return rows * heads * length * length * 4 > LONG_SCORES


def attention_in_blocks(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask_bias: np.ndarray | None,
    window: int | None,
    *,
    out: np.ndarray,
) -> np.ndarray:
    """Scaled dot-product attention (`layers.attention`), a block of queries at a time; with a window, each
    block against the keys of its band only.

    q, k, v, out: (rows, heads, seq, head_size); mask_bias: (rows, 1, 1, seq) where keys are padding, or None;
    window: a sliding-window layer's reach, or None (every key). The context is written into `out`.
    """
    rows, heads, seq, _ = q.shape
    scratch = Scratch()  # each block's temporaries, reused by the next
    if window is None:  # a head at a time: its products as large as the block allows
        block = max(MIN_BLOCK, BLOCK_BYTES // (4 * rows * seq))
        for head in range(heads):
            one = slice(head, head + 1)
            for start in range(0, seq, block):
                end = min(seq, start + block)
                turns.point()  # waiting short work may go first (numbert.model.turns)
                with scratch:
                    attention(q[:, one, start:end], k[:, one], v[:, one], mask_bias, out=out[:, one, start:end])
        return out
    # a band: every head at once, in blocks of BAND_BLOCK windows
    block = max(MIN_BLOCK, min(BAND_BLOCK * window, BLOCK_BYTES // (4 * rows * heads * (BAND_BLOCK + 2) * window)))
    for start in range(0, seq, block):
        end = min(seq, start + block)
        first, last = max(0, start - window), min(seq, end + window)
        banded = band(end - start, last - first, first - start, window)
        bias = banded if mask_bias is None else np.minimum(mask_bias[..., first:last], banded)  # never -inf
        turns.point()
        with scratch:
            attention(q[:, :, start:end], k[:, :, first:last], v[:, :, first:last], bias, out=out[:, :, start:end])
    return out
