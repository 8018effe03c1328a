"""The Unigram language model (Kudo 2018; SentencePiece, XLM-RoBERTa): every piece of the vocabulary has a
log-probability, and a word is split into the pieces whose scores sum highest (Viterbi):

    best[0] = 0
    for each end position e, best[e] = max over pieces p = word[s:e] of best[s] + score(p)
    walk back from the word's end along the chosen pieces

The pieces starting at each position are found in a radix tree (`Trie`). A character no piece of one character
covers gets the unknown piece, scored (lowest score - 10); runs of
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
        for i, (piece, score) in enumerate(pieces):
            if not math.isfinite(score):  # (Python's JSON reads NaN, Infinity and 1e999; Rust's refuses them)
                raise ValueError(
                    f"{source}: model.vocab[{i}] ({piece!r}) has the score {score}, which is not a finite number"
                )
        self.pieces = [piece for piece, _ in pieces]
        self.vocab = {piece: i for i, piece in enumerate(self.pieces)}
        self.scores = [float(score) for _, score in pieces]  # by id
        if unk_id is not None and not 0 <= unk_id < len(self.pieces):
            raise ValueError(f"{source}: model.unk_id {unk_id} is not the index of a piece of model.vocab")
        self.unk_id, self.byte_fallback = unk_id, byte_fallback
        self.unk_score = min(self.scores, default=0.0) - UNK_PENALTY
        self.trie = Trie()
        for piece, i in self.vocab.items():
            self.trie.insert(piece, i)

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
        """(start, end, unknown) of the best-scoring pieces of `word`, runs of unknown ones fused. As in Rust, the
        first path to reach a position is kept whatever its score (so -1e308 + -1e308 = -inf still reaches it), and
        a later one replaces it only when it scores strictly higher."""
        n, scores = len(word), self.scores
        edges, children, ids = self.trie.edges, self.trie.children, self.trie.ids
        best = [0.0] * (n + 1)  # best[e]: the score of the best path to position e
        back = [-1] * (n + 1)  # back[e]: where the last piece of that path starts (-1: no path yet)
        is_unknown = [False] * (n + 1)  # is_unknown[e]: whether that piece is the unknown one
        for start in range(n):
            so_far, single, node, pos = best[start], False, 0, start
            while pos < n:  # down the trie along word[start:]: each piece that starts the rest of the word
                kids = children[node]
                child = None if kids is None else kids.get(word[pos])
                if child is None or not word.startswith(edges[child], pos):
                    break
                node, pos = child, pos + len(edges[child])
                if ids[node] >= 0:
                    score = so_far + scores[ids[node]]
                    if back[pos] < 0 or score > best[pos]:
                        best[pos], back[pos], is_unknown[pos] = score, start, False
                    single = single or pos == start + 1
            if not single:  # no piece of one character: the unknown piece
                if self.unk_id is None:
                    raise ValueError(f"{word[start]!r} is in no piece of the vocabulary, which has no unknown piece")
                score = so_far + self.unk_score
                if back[start + 1] < 0 or score > best[start + 1]:
                    best[start + 1], back[start + 1], is_unknown[start + 1] = score, start, True
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


class Trie:
    """The pieces as a radix tree: node 0 is the root; `edges[i]` is the text on the edge into node i (a chain of
    characters no piece branches from or ends inside is one edge), `children[i]` maps the first character of each
    edge out of it to the child (None for a leaf), `ids[i]` is the id of the piece that ends at node i (-1: none).
    Its size is linear in the vocabulary's total length (a piece of 30,000 characters is one edge), and the search
    from a position stops where no piece goes on."""

    def __init__(self) -> None:
        self.edges: list[str] = [""]
        self.children: list[dict[str, int] | None] = [None]
        self.ids: list[int] = [-1]

    def _node(self, edge: str, children: dict[str, int] | None, piece_id: int) -> int:
        self.edges.append(edge)
        self.children.append(children)
        self.ids.append(piece_id)
        return len(self.edges) - 1

    def insert(self, piece: str, piece_id: int) -> None:
        """Add a piece (a piece added again takes the new id)."""
        node, pos = 0, 0
        while pos < len(piece):
            kids = self.children[node]
            if kids is None:
                kids = self.children[node] = {}
            child = kids.get(piece[pos])
            if child is None:
                kids[piece[pos]] = self._node(piece[pos:], None, piece_id)
                return
            edge = self.edges[child]
            shared = _shared(edge, piece, pos)
            if shared < len(edge):  # the piece leaves the edge, or ends, inside it: split the edge there
                self.edges[child] = edge[shared:]
                kids[piece[pos]] = child = self._node(edge[:shared], {edge[shared]: child}, -1)
            node, pos = child, pos + shared
        self.ids[node] = piece_id


def _shared(edge: str, piece: str, pos: int) -> int:
    """How many characters `edge` and piece[pos:] have in common at their start (at least 1)."""
    low, high = 1, min(len(edge), len(piece) - pos)  # piece[pos:pos + low] == edge[:low]; find the largest
    while low < high:
        middle = (low + high + 1) // 2
        if piece.startswith(edge[:middle], pos):
            low = middle
        else:
            high = middle - 1
    return low
