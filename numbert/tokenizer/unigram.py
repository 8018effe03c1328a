"""The Unigram language model (Kudo 2018; SentencePiece, XLM-RoBERTa): every piece of the vocabulary has a
log-probability, and a word is split into the pieces whose scores sum highest (Viterbi):

    best[0] = 0
    for each end position e, best[e] = max over pieces p = word[s:e] of best[s] + score(p)
    walk back from the word's end along the chosen pieces

A character no piece of one character covers gets the unknown piece, scored (lowest score - 10); runs of
unknown pieces are fused into one token, whose text is kept as the token. Ties keep the first candidate in
the Rust crate's order: start positions left to right, shorter pieces first. With byte_fallback, an unknown
run becomes the <0xXX> pieces of its UTF-8 bytes when all of them are in the vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

UNK_PENALTY = 10.0


class Unigram:
    """A Unigram model: the pieces with their scores, and the unknown piece's id."""

    def __init__(
        self,
        pieces: Sequence[tuple[str, float]],
        unk_id: int | None,
        byte_fallback: bool = False,
        source: str = "tokenizer.json",
    ):
        self.pieces = [piece for piece, _ in pieces]
        self.vocab = {piece: i for i, piece in enumerate(self.pieces)}
        self.scores = {piece: float(score) for piece, score in pieces}
        if unk_id is not None and not 0 <= unk_id < len(self.pieces):
            raise ValueError(f"{source}: model.unk_id {unk_id} is not the index of a piece of model.vocab")
        self.unk_id, self.byte_fallback = unk_id, byte_fallback
        self.unk_score = min(self.scores.values(), default=0.0) - UNK_PENALTY
        # every prefix of a piece -> the piece's score, or None when the prefix is no piece itself: a trie
        # as a dict, so the search for pieces starting at a position stops where no piece goes on
        self.prefixes: dict[str, float | None] = dict(self.scores)
        for piece in self.pieces:
            for k in range(len(piece) - 1, 0, -1):  # until a prefix already in: its own prefixes are (or will be)
                if piece[:k] in self.prefixes:
                    break
                self.prefixes[piece[:k]] = None

    @property
    def unk_token(self) -> str | None:
        """The unknown piece (None: a character no piece covers is refused)."""
        return None if self.unk_id is None else self.pieces[self.unk_id]

    def tokenize(self, word: str) -> list[tuple[int, str, int, int]]:
        """(id, token, start, end) of each token of `word` (character positions in it)."""
        tokens = []
        for start, end, unknown in self.viterbi(word):
            text = word[start:end]
            if unknown and text not in self.vocab:
                tokens += self.unknown(text, start, end)
            else:
                tokens.append((self.vocab[text], text, start, end))
        return tokens

    def viterbi(self, word: str) -> list[tuple[int, int, bool]]:
        """(start, end, unknown) of the best-scoring pieces of `word`, runs of unknown ones fused."""
        n, prefixes = len(word), self.prefixes
        best = [0.0] + [-math.inf] * n  # best[e]: the score of the best path to position e
        back = [0] * (n + 1)  # back[e]: where the last piece of that path starts
        is_unknown = [False] * (n + 1)  # is_unknown[e]: whether that piece is the unknown one
        for start in range(n):
            so_far = best[start]
            for end in range(start + 1, n + 1):
                text = word[start:end]
                if text not in prefixes:
                    break  # no piece starts with word[start:end]
                score = prefixes[text]
                if score is not None and so_far + score > best[end]:
                    best[end], back[end] = so_far + score, start
            if word[start] not in self.scores:  # no piece of one character: the unknown piece
                if self.unk_id is None:
                    raise ValueError(f"{word[start]!r} is in no piece of the vocabulary, which has no unknown piece")
                if so_far + self.unk_score > best[start + 1]:
                    best[start + 1], back[start + 1], is_unknown[start + 1] = so_far + self.unk_score, start, True
        path: list[tuple[int, int, bool]] = []
        end = n
        while end > 0:
            start, unknown = back[end], is_unknown[end]
            if unknown and path and path[-1][2]:
                path[-1] = (start, path[-1][1], True)
            else:
                path.append((start, end, unknown))
            end = start
        return path[::-1]

    def unknown(self, text: str, start: int, end: int) -> list[tuple[int, str, int, int]]:
        """The token(s) of a run of unknown characters at [start, end): its bytes' pieces (byte_fallback) or the
        unknown piece's id with the run's text."""
        if self.byte_fallback:
            pieces = [f"<0x{b:02X}>" for b in text.encode("utf-8", "surrogatepass")]
            if all(p in self.vocab for p in pieces):
                return [(self.vocab[p], p, start, end) for p in pieces]
        return [(self.unk_id, text, start, end)]  # type: ignore[list-item]
