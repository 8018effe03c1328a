"""Decoders: tokens back to text, the way round of the stages (`Tokenizer.decode`).

WordPieceDecoder   "##" pieces glue to the token before, other tokens get a space (BERT)
ByteLevelDecoder   the byte characters back to bytes, decoded as UTF-8 (GPT-2, RoBERTa, Qwen)
MetaspaceDecoder   "▁" back to spaces, the first one dropped (SentencePiece)
SpaceDecoder       tokens joined by spaces (a tokenizer.json without a decoder)

and the steps of a decoder Sequence (Gemma's and Llama's: Replace "▁" -> " ", ByteFallback, Fuse, Strip). As in
the Rust library, each decoder is a step from tokens to tokens (`chain`), and decoding is the last step's tokens
joined: a Sequence runs its steps one after the other.

ReplaceDecoder     every match of a pattern in each token replaced (Gemma's "▁" -> " ")
ByteFallbackDecoder  runs of <0xNN> tokens back to the text of their bytes (each byte a U+FFFD when not UTF-8)
FuseDecoder        every token fused into one
StripDecoder       up to n copies of a character cut from each token's start and end
SequenceDecoder    the steps one after the other
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from .patterns import Pattern
from .pre_tokenizers import CHAR_BYTES


class Decoder(Protocol):
    """A decoder: tokens -> tokens (`chain`, a step of a Sequence); `decode` joins what `chain` gives."""

    def chain(self, tokens: list[str]) -> list[str]: ...

    def decode(self, tokens: Sequence[str]) -> str: ...


class Step:
    """A decoder defined by its step: decoding joins the tokens the step gives."""

    def chain(self, tokens: list[str]) -> list[str]:
        raise NotImplementedError

    def decode(self, tokens: Sequence[str]) -> str:
        return "".join(self.chain(list(tokens)))


class WordPieceDecoder(Step):
    """The Rust WordPiece decoder: `##` pieces glue to the previous token, other tokens get a space, except
    `.`, `,`, `!` and `?`.

    It cleans up each token on its own, so its rules that span tokens (" n't", " 's", ...) never apply: "don't"
    comes back as "don ' t" (transformers' Python tokenizer gives "don't")."""

    def chain(self, tokens: list[str]) -> list[str]:
        out = []
        for i, token in enumerate(tokens):
            if i > 0:
                token = token[2:] if token.startswith("##") else " " + token
            out.append(_cleanup(token))
        return out


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


class ByteLevelDecoder(Step):
    """GPT-2's byte characters back to bytes, decoded as UTF-8 (a broken sequence becomes U+FFFD): one token. A
    token holding a character outside the byte alphabet (an added token) stands for its own UTF-8 bytes, whole."""

    def chain(self, tokens: list[str]) -> list[str]:
        data = b"".join(
            bytes(CHAR_BYTES[c] for c in t) if all(c in CHAR_BYTES for c in t) else t.encode() for t in tokens
        )
        return [data.decode("utf-8", "replace")]


class MetaspaceDecoder(Step):
    """SentencePiece's "▁" back to spaces; the first token's dropped when the pre-tokenizer prepends one."""

    def __init__(self, replacement: str = "▁", prepend_scheme: str = "always"):
        self.replacement, self.prepend_scheme = replacement, prepend_scheme

    def chain(self, tokens: list[str]) -> list[str]:
        first = self.prepend_scheme != "never"
        return [t.replace(self.replacement, "" if i == 0 and first else " ") for i, t in enumerate(tokens)]


class SpaceDecoder:
    """Tokens joined by spaces (a tokenizer.json without a decoder)."""

    def chain(self, tokens: list[str]) -> list[str]:
        return list(tokens)

    def decode(self, tokens: Sequence[str]) -> str:
        return " ".join(tokens)


class ReplaceDecoder(Step):
    """Every match of `pattern` in each token replaced by `content` (Gemma's "▁" back to " ")."""

    def __init__(self, pattern: Pattern, content: str):
        self.pattern, self.content = pattern, content

    def chain(self, tokens: list[str]) -> list[str]:
        out = []
        for token in tokens:
            pieces, pos = [], 0
            for start, end in self.pattern.spans(token):
                pieces += [token[pos:start], self.content]
                pos = end
            out.append("".join(pieces) + token[pos:] if pieces else token)
        return out


BYTE_TOKEN = re.compile(r"<0x(\+?[0-9A-Fa-f]{1,2})>")  # as Rust reads it: u8::from_str_radix of its 2 bytes


class ByteFallbackDecoder(Step):
    """Each run of byte tokens (<0xNN>, six bytes long) back to the text of its bytes; a run that is not UTF-8 becomes
    one U+FFFD per byte. Other tokens pass unchanged."""

    def chain(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        run = bytearray()
        for token in [*tokens, None]:
            match = BYTE_TOKEN.fullmatch(token) if token is not None and len(token.encode()) == 6 else None
            if match:
                run.append(int(match[1], 16))
                continue
            if run:
                try:
                    out.append(run.decode("utf-8"))
                except UnicodeDecodeError:
                    out += ["\ufffd"] * len(run)
                run.clear()
            if token is not None:
                out.append(token)
        return out


class FuseDecoder(Step):
    """Every token fused into one."""

    def chain(self, tokens: list[str]) -> list[str]:
        return ["".join(tokens)]


class StripDecoder(Step):
    """Up to `start` copies of `content` cut from each token's start, and up to `stop` from its end."""

    def __init__(self, content: str, start: int, stop: int):
        self.content, self.start, self.stop = content, start, stop

    def chain(self, tokens: list[str]) -> list[str]:
        out = []
        for token in tokens:
            head = len(token) - len(token.lstrip(self.content))
            begin = min(head, self.start)
            tail = len(token) - len(token.rstrip(self.content))
            end = len(token) - min(tail, self.stop, len(token) - begin)
            out.append(token[begin:end])
        return out


class SequenceDecoder(Step):
    """The decoders `steps`, one after the other."""

    def __init__(self, steps: Sequence[Decoder]):
        self.steps = list(steps)

    def chain(self, tokens: list[str]) -> list[str]:
        for step in self.steps:
            tokens = step.chain(tokens)
        return tokens
