"""Decoders: tokens back to text, the way round of the stages (`Tokenizer.decode`).

WordPieceDecoder   "##" pieces glue to the token before, other tokens get a space (BERT)
ByteLevelDecoder   the byte characters back to bytes, decoded as UTF-8 (GPT-2, RoBERTa)
MetaspaceDecoder   "▁" back to spaces, the first one dropped (SentencePiece)
SpaceDecoder       tokens joined by spaces (a tokenizer.json without a decoder)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .pre_tokenizers import CHAR_BYTES


class Decoder(Protocol):
    """A decoder: tokens -> text."""

    def decode(self, tokens: Sequence[str]) -> str: ...


class WordPieceDecoder:
    """The Rust WordPiece decoder: `##` pieces glue to the previous token, other tokens get a space, except
    `.`, `,`, `!` and `?`.

    It cleans up each token on its own, so its rules that span tokens (" n't", " 's", ...) never apply: "don't"
    comes back as "don ' t" (transformers' Python tokenizer gives "don't")."""

    def decode(self, tokens: Sequence[str]) -> str:
        out = []
        for i, token in enumerate(tokens):
            if i > 0:
                token = token[2:] if token.startswith("##") else " " + token
            out.append(_cleanup(token))
        return "".join(out)


def _cleanup(token: str) -> str:
    """The Rust WordPiece decoder's clean-up, applied to each (space-prefixed) token."""
    for dirty, clean in (
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" do not", " don't"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ):
        token = token.replace(dirty, clean)
    return token


class ByteLevelDecoder:
    """GPT-2's byte characters back to bytes, decoded as UTF-8 (a broken sequence becomes U+FFFD)."""

    def decode(self, tokens: Sequence[str]) -> str:
        data = b"".join(bytes([CHAR_BYTES[c]]) if c in CHAR_BYTES else c.encode() for t in tokens for c in t)
        return data.decode("utf-8", "replace")


class MetaspaceDecoder:
    """SentencePiece's "▁" back to spaces; the first token's dropped when the pre-tokenizer prepends one."""

    def __init__(self, replacement: str = "▁", prepend_scheme: str = "always"):
        self.replacement, self.prepend_scheme = replacement, prepend_scheme

    def decode(self, tokens: Sequence[str]) -> str:
        first = self.prepend_scheme != "never"
        return "".join(t.replace(self.replacement, "" if i == 0 and first else " ") for i, t in enumerate(tokens))


class SpaceDecoder:
    """Tokens joined by spaces (a tokenizer.json without a decoder)."""

    def decode(self, tokens: Sequence[str]) -> str:
        return " ".join(tokens)
