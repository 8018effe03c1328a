"""The embedding recipes: from BERT's stack of hidden states to the vectors people actually use.

Every function here is a few lines of NumPy over the arrays one forward pass returns:

    hidden_states   (layers + 1, [batch,] seq, hidden)   index 0 = embedding layer, -1 = last layer
    attention_mask  ([batch,] seq)                        1 = real token, 0 = padding

The names follow the literature. The layer strategies are the rows of the BERT paper's
feature-based table (Devlin et al. 2018, table 7, CoNLL-2003 NER dev F1 with frozen features):

    embeddings 91.0 | second_to_last 95.6 | last 94.9 | sum_last_four 95.9 | concat_last_four 96.1 | sum_all 95.5

The sentence poolings are bert-as-service's (REDUCE_MEAN, REDUCE_MAX, REDUCE_MEAN_MAX, CLS_TOKEN,
SEP_TOKEN, CLS_POOLED) and sentence-transformers' (mean, max, cls, mean_sqrt_len_tokens,
weightedmean, lasttoken). Padding never counts: every reduction over tokens is masked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

f32 = np.float32

# strategy -> (layers, combine); "sum_all" is the paper's "sum all 12 layers": every encoder
# layer, the embedding layer (index 0) excluded. Concatenation is in the order listed (-1 first),
# as in the paper's tutorials and extract_features.py.
STRATEGIES = {
    "embeddings": ((0,), "sum"),
    "last": ((-1,), "sum"),
    "second_to_last": ((-2,), "sum"),
    "sum_last_four": ((-1, -2, -3, -4), "sum"),
    "concat_last_four": ((-1, -2, -3, -4), "concat"),
    "sum_all": (None, "sum"),
}
COMBINES = ("sum", "mean", "concat")
POOLINGS = ("mean", "max", "mean_max", "cls", "sep", "pooler", "mean_sqrt_len", "weighted_mean")
MERGES = ("mean", "sum", "first", "last")
Layers = str | int | Sequence[int]  # a strategy name, a layer index, or a list of indices


# --- choosing layers ---------------------------------------------------------------------------


def layer_selection(layers: Layers, combine: str | None, num_layers: int) -> tuple[list[int], str]:
    """Resolve a strategy name, one layer index, or a list of indices into (indices, combine).

    `num_layers` counts encoder layers (12 for bert-base); valid indices are -(num_layers + 1)
    .. num_layers, as Python indexes the (num_layers + 1)-long hidden_states. A named strategy
    fixes its own combination; `combine` (sum, mean, concat; default sum) applies to lists.
    """
    if isinstance(layers, str):
        if layers not in STRATEGIES:
            raise ValueError(
                f"unknown layer strategy {layers!r}; choose one of {', '.join(STRATEGIES)}, "
                f"or give layer indices such as [-1, -2]"
            )
        indices, own = STRATEGIES[layers]
        if combine is not None and combine != own:
            raise ValueError(f"strategy {layers!r} combines by {own}; pass a list of layers to use combine={combine!r}")
        chosen = list(range(1, num_layers + 1) if indices is None else indices)
        combine = own
    elif isinstance(layers, (int, np.integer)) and not isinstance(layers, bool):
        chosen = [int(layers)]
    elif isinstance(layers, Sequence) and not isinstance(layers, (bytes, bytearray)):
        chosen = list(layers)  # type: ignore[arg-type]  # a str was taken above; mypy keeps it in Sequence
        if not chosen or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in chosen):
            raise ValueError(f"layers must be a non-empty list of integers, got {chosen!r}")
    else:
        raise TypeError(f"layers must be a strategy name, an int or a list of ints, not {type(layers).__name__}")
    combine = "sum" if combine is None else combine
    if combine not in COMBINES:
        raise ValueError(f"unknown combine {combine!r}; choose one of {', '.join(COMBINES)}")
    for i in chosen:
        if not -(num_layers + 1) <= i <= num_layers:
            raise ValueError(
                f"layer {i} does not exist: this model has layers 0 (embeddings) .. {num_layers} "
                f"(or -1 .. -{num_layers + 1} from the top)"
            )
    return [int(i) for i in chosen], combine


def token_vectors(
    hidden_states: np.ndarray,
    layers: str | int | Sequence[int] = "sum_last_four",
    combine: str | None = None,
    attention_mask: np.ndarray | None = None,
) -> np.ndarray:
    """One vector per token from the chosen layers, summed, averaged or concatenated.

    (layers + 1, [batch,] seq, hidden) -> ([batch,] seq, hidden), or ([batch,] seq, k * hidden) for concat.
    With an attention_mask ([batch,] seq), padding positions are set to zero.
    """
    indices, combine = layer_selection(layers, combine, hidden_states.shape[0] - 1)
    if combine == "concat":
        x = np.concatenate([hidden_states[i] for i in indices], axis=-1)
    else:
        x = hidden_states[indices[0]].copy()
        for i in indices[1:]:
            x += hidden_states[i]
        if combine == "mean":
            x *= f32(1 / len(indices))
    if attention_mask is not None:
        x *= (attention_mask > 0)[..., None]
    return x


# --- sentence pooling ----------------------------------------------------------------------------


def masked_mean(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sum(x * m) / sum(m) over the tokens. x: (batch, seq, dim), mask: (batch, seq) -> (batch, dim)"""
    m = mask[..., None].astype(f32)  # (batch, seq, 1)
    return (x * m).sum(axis=-2) / np.maximum(m.sum(axis=-2), f32(1e-9))


def masked_max(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The largest value of each dimension over the real tokens; zeros for a sequence with none (as
    masked_mean gives). (batch, seq, dim) -> (batch, dim)"""
    real = mask[..., None] > 0  # (batch, seq, 1)
    return np.where(real.any(axis=-2), np.where(real, x, f32(-np.inf)).max(axis=-2), f32(0))


def pool(x: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    """One vector per sequence from its token vectors; padding never counts.

    x: (batch, seq, dim), mask: (batch, seq) -> (batch, dim), (batch, 2 * dim) for mean_max.
    mean_sqrt_len divides the sum by sqrt(length) and weighted_mean weights token i by i + 1,
    both as sentence-transformers does; sep takes the last real token ([SEP] for BERT).
    """
    if pooling == "mean":
        return masked_mean(x, mask)
    if pooling == "max":
        return masked_max(x, mask)
    if pooling == "mean_max":
        return np.concatenate([masked_mean(x, mask), masked_max(x, mask)], axis=-1)
    if pooling == "cls":
        return x[:, 0]
    if pooling == "sep":  # the last position the mask keeps, padding on either side (sentence-transformers' lasttoken)
        kept = np.asarray(mask) > 0
        last = x.shape[-2] - 1 - np.argmax(kept[:, ::-1], axis=-1)  # (batch,)
        return np.where(np.any(kept, axis=-1, keepdims=True), x[np.arange(x.shape[0]), last], f32(0))
    if pooling == "mean_sqrt_len":
        m = mask.astype(f32)
        return (x * m[..., None]).sum(axis=-2) / np.sqrt(np.maximum(m.sum(axis=-1, keepdims=True), f32(1e-9)))
    if pooling == "weighted_mean":
        first = np.argmax(mask > 0, axis=-1)[:, None]  # left padding: counted from the first real token, as ST does
        return masked_mean(x, mask * (np.arange(1, x.shape[-2] + 1, dtype=f32) - first))  # token i weighs i + 1
    raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")


def sentence_vectors(
    hidden_states: np.ndarray,
    attention_mask: np.ndarray,
    pooling: str | Sequence[str] = "mean",
    layers: str | int | Sequence[int] | None = -2,
    combine: str | None = None,
    pooler_output: np.ndarray | None = None,
) -> np.ndarray:
    """One vector per sentence: `pooling` over the token vectors of `layers` (default: mean of layer -2).

    hidden_states (layers + 1, batch, seq, hidden), attention_mask (batch, seq) -> (batch, dim).
    A tuple of poolings is concatenated in order, as a sentence-transformers Pooling module with
    several modes does. "pooler" is BERT's pooler output (tanh(W h_[CLS] + b)), which has no layer.
    """
    poolings = (pooling,) if isinstance(pooling, str) else tuple(pooling)
    unknown = [p for p in poolings if p not in POOLINGS]
    if unknown or not poolings:
        raise ValueError(f"unknown pooling {unknown[0] if unknown else pooling!r}; choose one of {', '.join(POOLINGS)}")
    if "pooler" in poolings and pooler_output is None:
        raise ValueError(
            "pooling='pooler' needs pooler_output, and there is none (a checkpoint saved without "
            "BERT's pooler, as from BertForMaskedLM, has none); pool the tokens instead, e.g. 'cls'"
        )
    vectors = {} if pooler_output is None else {"pooler": pooler_output}  # (batch, dim) each
    if any(p != "pooler" for p in poolings):
        x = token_vectors(hidden_states, -2 if layers is None else layers, combine)  # (batch, seq, dim)
        vectors.update({p: pool(x, attention_mask, p) for p in poolings if p != "pooler"})
    parts = [vectors[p] for p in poolings]
    return np.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]


# --- words -----------------------------------------------------------------------------------------


@dataclass
class Word:
    """A word of the input text with its vector, merged from its WordPiece pieces."""

    text: str  # the word as it appears in the input (original case and accents)
    span: tuple[int, int]  # character span [start, end) in its segment's text
    vector: np.ndarray  # (dim,)
    tokens: list[str]  # the pieces, e.g. ["em", "##bed", "##ding", "##s"]
    segment: int = 0  # 0 for the first text, 1 for the second of a pair

    def __repr__(self) -> str:
        return f"Word({self.text!r}, span={self.span}, tokens={self.tokens}, segment={self.segment})"


def merge_pieces(vectors: np.ndarray, merge: str) -> np.ndarray:
    """Combine the vectors of one word's pieces. (pieces, dim) -> (dim,)"""
    if merge == "mean":
        return vectors.mean(axis=0)
    if merge == "sum":
        return vectors.sum(axis=0)
    if merge == "first":
        return vectors[0].copy()
    if merge == "last":
        return vectors[-1].copy()
    raise ValueError(f"unknown merge {merge!r}; choose one of {', '.join(MERGES)}")


def word_vectors(
    vectors: np.ndarray, encoding, texts: Sequence[str | None] = (None, None), merge: str = "mean"
) -> list[Word]:
    """Group one sequence's token vectors into words by the encoding's word ids, merge each group.

    vectors: (seq, dim) for one sequence; `encoding` gives tokens, word_ids, sequence_ids and
    offsets (padding positions beyond it are ignored). A word is the pieces that share a
    (segment, word id); its text is cut from `texts[segment]` by the pieces' character offsets,
    or, when the text is unknown, spelled from the pieces without their "##".
    """
    if merge not in MERGES:
        raise ValueError(f"unknown merge {merge!r}; choose one of {', '.join(MERGES)}")
    groups: dict[tuple[int, int], list[int]] = {}
    for position, (word, segment) in enumerate(zip(encoding.word_ids, encoding.sequence_ids)):
        if word is not None and segment is not None:
            groups.setdefault((segment, word), []).append(position)
    words = []
    for (segment, _), positions in groups.items():
        start, end = encoding.offsets[positions[0]][0], encoding.offsets[positions[-1]][1]
        pieces = [encoding.tokens[p] for p in positions]
        text = texts[segment] if segment < len(texts) else None
        spelled = text[start:end] if text is not None else "".join(p.removeprefix("##") for p in pieces)
        words.append(Word(spelled, (int(start), int(end)), merge_pieces(vectors[positions], merge), pieces, segment))
    return words


# --- similarity ------------------------------------------------------------------------------------


class Neighbor(NamedTuple):
    """A vocabulary entry and its cosine similarity to a query."""

    token: str
    id: int
    similarity: float


def normalize(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Scale each vector (last axis) to unit L2 length; a zero vector stays zero. (..., dim) -> (..., dim)"""
    x = np.asarray(x, dtype=f32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), f32(eps))


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray | float:
    """cos(a, b) = a.b / (|a| |b|) along the last axis, broadcasting the rest; a float for two vectors."""
    c = (normalize(a) * normalize(b)).sum(axis=-1)
    return float(c) if np.ndim(c) == 0 else c


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """All pairwise cosines. a: (n, dim), b: (m, dim) -> (n, m)"""
    return normalize(a) @ normalize(b).T


def nearest(unit_rows: np.ndarray, query: np.ndarray, k: int, exclude: Sequence[int] = ()) -> list[tuple[int, float]]:
    """The k rows most cosine-similar to `query`, best first, as (row, cosine).

    unit_rows: (n, dim) already L2-normalised (e.g. the vocabulary's embeddings), query: (dim,).
    """
    sims = unit_rows @ normalize(query)  # (n,)
    sims[list(exclude)] = -np.inf
    k = min(k, len(sims) - len(exclude))
    top = np.argpartition(-sims, k - 1)[:k]
    top = top[np.argsort(-sims[top], kind="stable")]
    return [(int(i), float(sims[i])) for i in top]
