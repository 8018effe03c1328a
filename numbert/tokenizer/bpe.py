"""Byte-pair encoding (Sennrich et al. 2016; GPT-2, RoBERTa): a word is split into characters, then the
adjacent pair with the best rank in the merges list is merged, again and again, until no pair is in it.

    symbols = list(word)
    while some adjacent pair of symbols is in `ranks`:
        merge the leftmost occurrence of the pair with the lowest rank into one symbol

That is exactly the Rust `tokenizers` crate's order (a priority queue on (rank, position)); `merge_word`
runs it with a heap over a linked list of symbols, so a long word costs n log n, not n^2. (The tokenizer
memoizes words: tokenizer.py's stages, pipeline_fast.py.)
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence


class BPE:
    """A BPE model: vocabulary, merges by rank, and what a character outside the vocabulary becomes."""

    def __init__(
        self,
        vocab: Mapping[str, int],
        merges: Sequence[tuple[str, str]],
        *,
        unk_token: str | None = None,
        fuse_unk: bool = False,
        byte_fallback: bool = False,
        ignore_merges: bool = False,
        source: str = "tokenizer.json",
    ):
        self.vocab = dict(vocab)
        self.ranks: dict[tuple[str, str], int] = {}
        for rank, (left, right) in enumerate(merges):
            for part in (left, right, left + right):
                if part not in self.vocab:
                    raise ValueError(
                        f"{source}: model.merges[{rank}] ({left} {right}) uses {part!r}, not in model.vocab"
                    )
            self.ranks[left, right] = rank  # a merge listed twice takes its last rank, as in Rust
        if unk_token is not None and unk_token not in self.vocab:
            raise ValueError(f"{source}: model.unk_token {unk_token!r} is not in model.vocab")
        self.unk_token, self.fuse_unk, self.byte_fallback = unk_token, fuse_unk, byte_fallback
        self.ignore_merges = ignore_merges

    def tokenize(self, word: str) -> list[tuple[int, str, int, int]]:
        """(id, token, start, end) of each token of `word` (character positions in it)."""
        if self.ignore_merges and word in self.vocab:
            return [(self.vocab[word], word, 0, len(word))]
        return [(self.vocab[s], s, start, end) for s, start, end in self.merge_word(self.symbols(word))]

    def symbols(self, word: str) -> list[tuple[str, int, int]]:
        """The word's characters as (symbol, start, end); a character outside the vocabulary becomes its
        UTF-8 bytes' <0xXX> tokens (byte_fallback, when all exist), else the unknown token (consecutive ones
        fused into one with fuse_unk), else nothing."""
        symbols: list[tuple[str, int, int]] = []
        for i, c in enumerate(word):
            if c in self.vocab:
                symbols.append((c, i, i + 1))
                continue
            if self.byte_fallback:
                pieces = [f"<0x{b:02X}>" for b in c.encode("utf-8", "surrogatepass")]
                if all(p in self.vocab for p in pieces):
                    symbols += [(p, i, i + 1) for p in pieces]
                    continue
            if self.unk_token is not None:
                if self.fuse_unk and symbols and symbols[-1][0] == self.unk_token and symbols[-1][2] == i:
                    symbols[-1] = (self.unk_token, symbols[-1][1], i + 1)
                else:
                    symbols.append((self.unk_token, i, i + 1))
        return symbols

    def merge_word(self, symbols: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
        """The merges applied to `symbols`, lowest rank first, leftmost first among equal ranks."""
        n, rank_of = len(symbols), self.ranks.get
        if n < 2:
            return symbols
        text = [s for s, _, _ in symbols]  # the symbol at each position; "" once merged into its left neighbour
        nxt, prv = list(range(1, n + 1)), list(range(-1, n - 1))  # the linked list of the symbols left
        queue = [(rank, i) for i, rank in enumerate(map(rank_of, zip(text, text[1:]))) if rank is not None]
        heapq.heapify(queue)
        while queue:
            rank, i = heapq.heappop(queue)
            j = nxt[i] if text[i] else n
            if j >= n or rank_of((text[i], text[j])) != rank:
                continue  # stale: one of the two was merged since
            text[i], text[j] = text[i] + text[j], ""
            right = nxt[i] = nxt[j]
            if right < n:  # the new pair on the merged symbol's right
                prv[right] = i
                if (r := rank_of((text[i], text[right]))) is not None:
                    heapq.heappush(queue, (r, i))
            left = prv[i]
            if left >= 0 and (r := rank_of((text[left], text[i]))) is not None:  # and on its left
                heapq.heappush(queue, (r, left))
        merged, i = [], 0
        while i < n:  # each symbol left spans from its first position's start to its last one's end
            merged.append((text[i], symbols[i][1], symbols[nxt[i] - 1][2]))
            i = nxt[i]
        return merged
