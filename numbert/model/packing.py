"""Packing: the real tokens of a padded batch in one (tokens, hidden) array, so no layer works on padding.

A batch of sentences of different lengths is right-padded to its longest (numbert.pipeline.planner), but only
attention mixes tokens: the QKV, output, up and down products, LayerNorm, GELU and the bias adds treat
each token on its own. So the encoder runs them on the real tokens alone, packed row after row into one
(tokens, hidden) array, and runs attention per group of sequences of one length, each group a
contiguous (rows, length, hidden) block of the packed array with no padding and no mask:

    packing = Packing(attention_mask)           # (batch, seq) of 1/0, right-padded
    x = packing.pack(padded)                    # (batch, seq, hidden) -> (tokens, hidden)
    packing.unpack(x, out=padded)               # and back, padding left as it was in `out`
    context = attention_by_group(q, k, v, packing, heads, out=...)
    first = first_query_attention(q_first, k, v, packing, heads, out=...)   # each row's [CLS] query alone

The rows are packed shortest first, so each length's rows lie together. A mask that is not right-padded
(padding on the left or in the middle) packs every position as one group with the mask as a bias, the
padded computation as before. Reference: `reference.forward` runs on the padded batch; they agree on
the real tokens (tests/test_reference.py).
"""

from __future__ import annotations

from functools import cached_property
from typing import NamedTuple

import numpy as np

from .attention_blocks import attention_in_blocks, band, is_long
from .layers import attention, attention_mask_bias, heads_layout, split_heads


class Group(NamedTuple):
    """Sequences attended together: `rows` of the batch, each `length` tokens, packed one after the other
    from `start`; mask_bias (rows, 1, 1, length) where they hold padding, else None."""

    rows: np.ndarray  # (n,) batch row indices
    length: int
    start: int
    mask_bias: np.ndarray | None

    @property
    def tokens(self) -> slice:
        """The group's place in the packed (tokens, ...) arrays: n * length tokens."""
        return slice(self.start, self.start + len(self.rows) * self.length)


class Packing:
    """Where each real token of a (batch, seq) attention mask goes in the packed (tokens, ...) arrays."""

    def __init__(self, attention_mask: np.ndarray, every_position: bool = False):
        batch, seq = attention_mask.shape
        self.shape = (batch, seq)
        lengths = attention_mask.astype(bool).sum(axis=1)
        # each row's last position the mask keeps (0 for a row it hides whole)
        self.last_columns = seq - 1 - np.argmax(attention_mask[:, ::-1] != 0, axis=1) if seq else lengths
        positions = np.arange(seq)
        right_padded = np.array_equal(attention_mask != 0, positions < lengths[:, None])
        if right_padded and not every_position:  # pack the real tokens
            order = np.argsort(lengths, kind="stable")
            kept = positions < lengths[order, None]  # (batch, seq), in packing order
            self.index = (order[:, None] * seq + positions)[kept]  # (tokens,) flat (batch * seq) positions
            ends = np.cumsum(lengths[order]) - lengths[order]  # each packed row's start
            self.groups = [
                Group(order[lengths[order] == n], int(n), int(ends[lengths[order] == n][0]), None)
                for n in np.unique(lengths)
                if n > 0
            ]
        else:  # padding elsewhere, or asked for every position: one group, masked as the padded batch is
            self.index = np.arange(batch * seq)
            self.groups = [Group(np.arange(batch), seq, 0, attention_mask_bias(attention_mask))]
        self.real_tokens = int(lengths.sum())

    @property
    def tokens(self) -> int:
        """How many tokens the packed arrays hold."""
        return len(self.index)

    @property
    def padding_ratio(self) -> float:
        """Tokens computed per real token in the dense layers: 1.0 when packed, batch * seq / real if not."""
        return self.tokens / max(1, self.real_tokens)

    @property
    def whole(self) -> bool:
        """True if the packed array is the padded batch in its own order (no padding): pack can be a view."""
        return self.tokens == self.shape[0] * self.shape[1] and len(self.groups) == 1

    @cached_property
    def firsts(self) -> np.ndarray:
        """Where each row's first token lies in the packed arrays, group after group. (rows,) int"""
        starts = [g.start + np.arange(len(g.rows)) * g.length for g in self.groups]
        return np.concatenate(starts) if starts else np.empty(0, np.int64)

    @cached_property
    def lasts(self) -> np.ndarray:
        """Where each row's last real token lies in the packed arrays, in `firsts`' order. (rows,) int"""
        ends = [g.start + np.arange(1, len(g.rows) + 1) * g.length - 1 for g in self.groups if g.mask_bias is None]
        if ends or not self.groups:
            return np.concatenate(ends) if ends else np.empty(0, np.int64)
        (g,) = self.groups  # padding elsewhere: every position packed, the row's last one the mask keeps
        return g.rows * g.length + self.last_columns

    def positions(self, one_token: str) -> np.ndarray:
        """`firsts` or `lasts`, by the token a reader reads: "first" or "last". (rows,) int"""
        return self.firsts if one_token == "first" else self.lasts

    @cached_property
    def first_rows(self) -> np.ndarray:
        """The batch row of each of `firsts`. (rows,) int"""
        return np.concatenate([g.rows for g in self.groups]) if self.groups else np.empty(0, np.int64)

    def pack(self, padded: np.ndarray) -> np.ndarray:
        """(batch, seq, ...) -> (tokens, ...): the real tokens, a view of `padded` when it has no padding."""
        flat = padded.reshape(-1, *padded.shape[2:])
        return flat if self.whole else flat[self.index]

    def unpack(self, packed: np.ndarray, out: np.ndarray) -> np.ndarray:
        """(tokens, ...) -> `out` (batch, seq, ...): the real tokens written back; padding is left as it was."""
        flat = out.reshape(-1, *out.shape[2:])  # a view: `out` is contiguous
        if not (self.whole and np.may_share_memory(flat, packed)):  # else `out` holds them already
            flat[self.index] = packed
        return out


def attention_by_group(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    packing: Packing,
    heads: int,
    score_bias: np.ndarray | None = None,
    output_probs: bool = False,
    *,
    out: np.ndarray,
    probs_out: np.ndarray | None = None,
    window: int | None = None,
) -> np.ndarray | None:
    """Scaled dot-product attention (`layers.attention`) over the packed tokens, one group at a time.

    q, k, v and out: (tokens, hidden), packed by `packing`; the context is written into `out`.
    score_bias: (heads, seq, seq) added to every sequence's scores (a relative-position bias), cut to
    each group's length, or None. window: a sliding-window layer's reach (ModernBERT: keys within 64 tokens
    of the query), or None. Returns the probabilities (batch, heads, seq, seq), zero where a
    query or key is padding, written into `probs_out` if given (it must hold zeros), if output_probs.
    A group whose scores would be long (attention_blocks.is_long) or whose sequences outreach the window runs
    a block of queries at a time (attention_blocks.attention_in_blocks), unless the probabilities are asked for.
    """
    batch, seq = packing.shape
    hidden = q.shape[-1]
    if output_probs and probs_out is None:
        probs_out = np.zeros((batch, heads, seq, seq), np.float32)
    for group in packing.groups:
        n, length, part = len(group.rows), group.length, group.tokens
        q_g, k_g, v_g = (split_heads(a[part].reshape(n, length, hidden), heads) for a in (q, k, v))
        bias = group_bias(group, score_bias, length)
        context = heads_layout(out[part].reshape(n, length, heads, hidden // heads))
        masked = window is not None and length > window + 1  # some keys lie outside some query's window
        banded = window is not None and length > 4 * window  # a band then does less work than the whole, masked
        if not output_probs and (banded or is_long(n, heads, length)):
            attention_in_blocks(q_g, k_g, v_g, bias, window if banded else None, out=context)
            continue
        if masked:
            assert window is not None
            bias = within(bias, band(length, length, 0, window))
        _, probs = attention(q_g, k_g, v_g, bias, output_probs, out=context)
        if probs_out is not None and probs is not None:
            probs_out[group.rows, :, :length, :length] = probs
    return probs_out


def first_query_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    packing: Packing,
    heads: int,
    score_bias: np.ndarray | None = None,
    *,
    out: np.ndarray,
    window: int | None = None,
) -> np.ndarray:
    """Scaled dot-product attention of each row's first token only (its [CLS]) against every key of its row:
    `attention_by_group`'s first query of each sequence, for a last layer whose other positions nobody reads.

    q, out: (rows, hidden), the first tokens' queries in `packing.firsts` order; k, v: (tokens, hidden), packed.
    score_bias: (heads, seq, seq) as for attention_by_group (its first row is used), or None; window: a
    sliding-window layer's reach, or None. The context is written into `out`, which is returned."""
    hidden = k.shape[-1]
    done = 0
    for group in packing.groups:
        n, length, part = len(group.rows), group.length, group.tokens
        q_g = split_heads(q[done : done + n].reshape(n, 1, hidden), heads)  # (n, heads, 1, head_size)
        k_g, v_g = (split_heads(a[part].reshape(n, length, hidden), heads) for a in (k, v))
        bias = group_bias(group, score_bias, 1)
        if window is not None and length > window + 1:  # keys beyond the first token's window
            bias = within(bias, band(1, length, 0, window))
        context = heads_layout(out[done : done + n].reshape(n, 1, heads, hidden // heads))
        attention(q_g, k_g, v_g, bias, out=context)
        done += n
    return out


def group_bias(group: Group, score_bias: np.ndarray | None, queries: int) -> np.ndarray | None:
    """What a group's scores get added: its padding mask (mask_bias) and the first `queries` rows of a relative-position
    bias (heads, seq, seq) cut to the group's length; None when there is neither."""
    bias = group.mask_bias
    if score_bias is None:
        return bias
    cut = score_bias[:, :queries, : group.length]
    return cut if bias is None else bias + cut


def within(bias: np.ndarray | None, window: np.ndarray) -> np.ndarray:
    """`bias` with a sliding window's band (0 inside, -inf outside) laid over it: both 0, or the minimum (never a
    sum of -infs)."""
    return window if bias is None else np.minimum(bias, window)
