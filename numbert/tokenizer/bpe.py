"""Byte-pair encoding (Sennrich et al. 2016; GPT-2, RoBERTa): a word is split into characters, then the
adjacent pair with the best rank in the merges list is merged, again and again, until no pair is in it.

    symbols = list(word)
    while some adjacent pair of symbols is in `ranks`:
        merge the leftmost occurrence of the pair with the lowest rank into one symbol

That is exactly the Rust `tokenizers` crate's order (a priority queue on (rank, position)); `merge_word`
runs it with a heap over a linked list of symbols, so a long word costs n log n, not n^2. (The tokenizer
memoizes words: tokenizer.py's stages, pipeline_fast.py.)

Gemma's normalizer writes spaces as "▁" and its pre-tokenizer never splits, so its words are whole texts. When no
merge joins a piece ending in another character to one starting with "▁" (`splits_at_metaspace`: SentencePiece's
pieces never do), no token crosses such a place, and a long word is tokenized piece by piece between them, each
piece memoized: the same tokens, in the time of the pieces.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import re
from collections.abc import Mapping, Sequence

from .memo import Memo

METASPACE = "▁"
MEMO_PIECE = 256  # characters: longer pieces of a word are tokenized without the memo


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
        self.pieces = Memo(self.tokenize_whole, 1 << 14)  # a piece of a word between cuts -> its tokens
        self.cuts = re.compile(f"(?<=[^{METASPACE}])(?={METASPACE})") if self.splits_at_metaspace() else None

    def splits_at_metaspace(self) -> bool:
        """Whether no token can cross a place between another character and "▁": no merge joins a piece ending in
        another character to one starting with "▁"; "▁" is in the vocabulary (an unknown token waiting for the next
        character in it is laid before it, as Rust lays it); every character becomes some token (an unknown one),
        so none dropped shifts what follows; and no word is looked up whole (ignore_merges)."""
        return (
            METASPACE in self.vocab
            and self.unk_token is not None
            and not self.ignore_merges
            and not any(b.startswith(METASPACE) and not a.endswith(METASPACE) for a, b in self.ranks)
        )

    def tokenize(self, word: str) -> list[tuple[int, str, int, int]]:
        """(id, token, start, end) of each token of `word` (character positions in it)."""
        if self.cuts is None or METASPACE not in word:
            return self.tokenize_whole(word)
        out: list[tuple[int, str, int, int]] = []
        start = 0
        for piece in self.cuts.split(word):
            found = self.pieces[piece] if len(piece) <= MEMO_PIECE else self.tokenize_whole(piece)
            out += [(i, t, s + start, e + start) for i, t, s, e in found] if start else found
            start += len(piece)
        return out

    def tokenize_whole(self, word: str) -> list[tuple[int, str, int, int]]:
        """`tokenize` on the word as one piece."""
        if self.ignore_merges and word in self.vocab:
            return [(self.vocab[word], word, 0, len(word))]
        return [(self.vocab[s], s, start, end) for s, start, end in self.merge_word(self.symbols(word))]

    def symbols(self, word: str) -> list[tuple[str, int, int]]:
        """The word's characters as (symbol, start, end); a character outside the vocabulary becomes its
        UTF-8 bytes' <0xXX> tokens (byte_fallback, when all exist), else the unknown token (consecutive ones
        fused into one with fuse_unk), else nothing.

        As the Rust crate, it lays the symbols end to end by their lengths in UTF-8 bytes, then reads each one's
        span as the characters its bytes fall in. That is the characters' own spans unless Rust's order differs
        from the text's: an unknown token waits for the next character in the vocabulary (byte pieces found
        meanwhile come before it), and a character dropped (no unknown token) shifts all that follows."""
        unk, pieces = self.unk_token, self.unknown(word)
        if pieces is None:  # every character in the vocabulary
            return [(c, i, i + 1) for i, c in enumerate(word)]
        laid: list[tuple[str, int]] = []  # (symbol, its length in bytes), in Rust's order
        pending = 0  # bytes of the unknown token not yet laid
        for c, size, fallback in pieces:
            if fallback is None:  # in the vocabulary
                if pending:
                    laid.append((unk, pending))  # type: ignore[arg-type]
                    pending = 0
                laid.append((c, size))
            elif fallback:
                laid += [(b, 1) for b in fallback]
            elif unk is not None:
                if pending and not self.fuse_unk:
                    laid.append((unk, pending))
                    pending = 0
                pending += size
        if pending:
            laid.append((unk, pending))  # type: ignore[arg-type]
        return spans_of(word, laid)

    def unknown(self, word: str) -> list[tuple[str, int, list[str] | None]] | None:
        """None when every character of `word` is in the vocabulary; else (character, its length in UTF-8 bytes,
        its byte pieces) of each: the pieces are None for a character in the vocabulary, [] for one byte fallback
        does not take (off, or a piece missing)."""
        vocab = self.vocab
        if all(c in vocab for c in word):
            return None
        out: list[tuple[str, int, list[str] | None]] = []
        for c in word:
            data = c.encode("utf-8", "surrogatepass")
            fallback: list[str] | None = None
            if c not in vocab:
                found = [f"<0x{b:02X}>" for b in data] if self.byte_fallback else []
                fallback = found if all(p in vocab for p in found) else []
            out.append((c, len(data), fallback))
        return out

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


def spans_of(word: str, laid: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """(symbol, start, end) in characters of symbols laid end to end by their lengths in UTF-8 bytes: a symbol spans
    from the character its first byte falls in to the one its last byte falls in."""
    starts = list(itertools.accumulate((len(c.encode("utf-8", "surrogatepass")) for c in word), initial=0))
    out, at = [], 0
    for symbol, size in laid:
        first = bisect.bisect_right(starts, at) - 1
        last = bisect.bisect_right(starts, at + size - 1) - 1
        out.append((symbol, first, last + 1))
        at += size
    return out
