"""The word-embedding table read as a vocabulary: a token's row, and the tokens nearest to a vector.

These are methods of numbert.Bert (model.token_embedding("bank"), model.nearest_tokens("bank")); they
look at the input embedding matrix alone: no position, no segment, no LayerNorm, no layer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..model import pooling
from .pipeline import Pipeline


def token_embedding(model: Pipeline, token: str | int | Sequence[str | int]) -> np.ndarray:
    """Rows of the word-embedding matrix: no position, no segment, no LayerNorm.

    A token is a vocabulary entry ("bank", "##ing") or its id; a word the tokenizer splits into
    several pieces is refused (pass the pieces). (hidden,) for one token, (n, hidden) for a list.
    """
    table = model.encoder.word_embeddings  # (vocab, hidden)
    if isinstance(token, (str, int, np.integer)) and not isinstance(token, bool):
        return table[token_id(model, token)].copy()
    if isinstance(token, (Sequence, np.ndarray)) and not isinstance(token, bytes):
        return table[[token_id(model, t) for t in token]].reshape(-1, model.config.hidden_size)
    raise TypeError(f"token must be a str, an int id or a list of them, not {type(token).__name__}")


def nearest_tokens(model: Pipeline, query: str | int | np.ndarray, k: int = 10) -> list[pooling.Neighbor]:
    """The k vocabulary entries whose token embeddings are closest by cosine, best first.

    `query` is a token (itself left out of the answer), an id, or a vector of hidden_size.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    tokenizer = model.require_tokenizer()
    if isinstance(query, (str, int, np.integer)) and not isinstance(query, bool):
        exclude = [token_id(model, query)]
        vector = model.encoder.word_embeddings[exclude[0]]
    else:
        given = np.asarray(query)
        if given.dtype.kind not in "biuf":
            raise TypeError(f"a query must be a token, an id or a vector of numbers, not {type(query).__name__}")
        exclude, vector = [], given.astype(np.float32)
        if vector.shape != (model.config.hidden_size,):
            raise ValueError(f"a query vector must have shape ({model.config.hidden_size},), got {vector.shape}")
    return [
        pooling.Neighbor(str(tokenizer.convert_ids_to_tokens(i)), i, s)
        for i, s in pooling.nearest(model.encoder.unit_word_embeddings, vector, k, exclude)
    ]


def token_id(model: Pipeline, token: str | int) -> int:
    """The id of a vocabulary entry, or a ValueError saying how the tokenizer splits it."""
    if not isinstance(token, str):
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
            raise TypeError(f"a token must be a str or an int id, not {type(token).__name__}")
        if not 0 <= token < model.config.vocab_size:
            raise ValueError(f"token id {token} is outside the vocabulary [0, {model.config.vocab_size})")
        return int(token)
    tokenizer = model.require_tokenizer()
    if token in tokenizer.vocab:
        return tokenizer.vocab[token]
    pieces = tokenizer.encode(token, add_special_tokens=False).tokens
    if len(pieces) != 1:
        raise ValueError(
            f"{token!r} is not one vocabulary entry: the tokenizer splits it into {pieces}; "
            f"pass one of those pieces or its id"
        )
    return tokenizer.vocab[pieces[0]]
