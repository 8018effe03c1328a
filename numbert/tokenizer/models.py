"""Models: the third stage, one word -> its tokens. Three of one kind, as in the Rust `tokenizers` library:

WordPiece   BERT's: greedy longest match first, "##" inside a word (here; the plain rule is basic.wordpiece)
BPE         byte-pair merges by rank (bpe.py)
Unigram     the pieces whose scores sum highest, by Viterbi (unigram.py)
WordLevel   each word one token (here)
"""

from __future__ import annotations

from typing import Protocol

from .basic import wordpiece


class Model(Protocol):
    """A model: `tokenize(word)` gives (id, token, start, end) of each token, start and end its characters in
    the word; `vocab` maps each token to its id; `unk_token` is what an unknown word or character becomes
    (None: it is dropped)."""

    vocab: dict[str, int]

    @property
    def unk_token(self) -> str | None: ...

    def tokenize(self, word: str) -> list[tuple[int, str, int, int]]: ...


class WordPiece:
    """BERT's WordPiece: each word cut, greedily from the left, into the longest pieces of the vocabulary (`##`
    inside a word); a word with no such cut, or longer than `max_input_chars_per_word`, is one `unk_token`."""

    def __init__(self, vocab: dict[str, int], unk_token: str = "[UNK]", max_input_chars_per_word: int = 100):
        self.vocab, self.unk_token, self.max_input_chars_per_word = vocab, unk_token, max_input_chars_per_word
        self.longest_piece = max(map(len, vocab))

    def tokenize(self, word: str) -> list[tuple[int, str, int, int]]:
        pieces = wordpiece(
            word,
            self.vocab,
            unk_token=self.unk_token,
            longest_piece=self.longest_piece,
            max_input_chars_per_word=self.max_input_chars_per_word,
        )
        return [(self.vocab[piece], piece, start, end) for piece, start, end in pieces]


class WordLevel:
    """Each word is one token: its id in the vocabulary, else the unknown token's. A word the vocabulary lacks,
    when it lacks the unknown token too, is an error (as in Rust, which loads such a file and fails on the word)."""

    def __init__(self, vocab: dict[str, int], unk_token: str):
        self.vocab, self.unknown = vocab, unk_token

    @property
    def unk_token(self) -> str | None:
        return self.unknown if self.unknown in self.vocab else None

    def tokenize(self, word: str) -> list[tuple[int, str, int, int]]:
        if not word:
            return []
        if word in self.vocab:
            return [(self.vocab[word], word, 0, len(word))]
        if self.unknown in self.vocab:
            return [(self.vocab[self.unknown], self.unknown, 0, len(word))]
        raise ValueError(
            f"{word[:50]!r} is not in the WordLevel vocabulary, which has no unknown token ({self.unknown!r})"
        )
