"""The BERT encoder: embeddings, a stack of attention + feed-forward layers, and the pooler.

Read top to bottom, this is section 3 of the BERT paper (Devlin et al., 2018) in NumPy:
`embed` sums the token, position and segment embeddings; each `encoder_layer` is multi-head
self-attention followed by a position-wise feed-forward network, both wrapped in a residual
connection and LayerNorm; `pool` is the dense + tanh over [CLS] used for sentence-level tasks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .checkpoint import load_weights
from .config import BertConfig
from .hub import model_dir
from .layers import (ACTIVATIONS, Linear, Norm, attention, attention_mask_bias, layer_norm, linear,
                     merge_heads, split_heads)
from .tokenizer import Tokenizer


class EncoderLayer(NamedTuple):
    """The weights of one transformer layer."""

    query: Linear
    key: Linear
    value: Linear
    attention_output: Linear
    attention_norm: Norm
    intermediate: Linear
    output: Linear
    output_norm: Norm


@dataclass
class Output:
    """Everything one forward pass computes. Arrays are float32; `[batch]` is absent for one input.

    hidden_states: (layers + 1, [batch,] seq, hidden); index 0 is the embedding layer's output,
        index i the output of layer i, as transformers' `hidden_states`.
    pooler_output: ([batch,] hidden), tanh(W h_[CLS] + b) over the last layer.
    attentions: (layers, [batch,] heads, seq, seq), the softmax probabilities, or None.
    """

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    attention_mask: np.ndarray
    hidden_states: np.ndarray
    pooler_output: np.ndarray
    attentions: np.ndarray | None = None
    tokens: list | None = None  # list[str], or one list per batch row (padding shows as [PAD])
    encodings: list | None = None  # the tokenizer's Encoding per input (offsets, word ids)

    @property
    def last_hidden_state(self) -> np.ndarray:
        """([batch,] seq, hidden)"""
        return self.hidden_states[-1]


class Bert:
    """A BERT encoder with its tokenizer. Build it with `numbert.load(...)`."""

    def __init__(self, config: BertConfig, weights: dict[str, np.ndarray], tokenizer: Tokenizer | None = None,
                 name: str | None = None):
        self.config = config
        self.weights = weights
        self.tokenizer = tokenizer
        self.name = name
        w = weights
        self.word_embeddings = w["embeddings.word_embeddings.weight"]  # (vocab, hidden)
        self.position_embeddings = w["embeddings.position_embeddings.weight"]  # (max_positions, hidden)
        self.token_type_embeddings = w["embeddings.token_type_embeddings.weight"]  # (type_vocab, hidden)
        self.embedding_norm = Norm(w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = [self._layer(f"encoder.layer.{i}.") for i in range(config.num_hidden_layers)]
        self.pooler = Linear(w["pooler.dense.weight"], w["pooler.dense.bias"])
        self.activation = ACTIVATIONS[config.hidden_act]

    def _layer(self, prefix: str) -> EncoderLayer:
        w = self.weights
        linear_ = lambda name: Linear(w[prefix + name + ".weight"], w[prefix + name + ".bias"])
        norm = lambda name: Norm(w[prefix + name + ".weight"], w[prefix + name + ".bias"])
        return EncoderLayer(
            query=linear_("attention.self.query"),
            key=linear_("attention.self.key"),
            value=linear_("attention.self.value"),
            attention_output=linear_("attention.output.dense"),
            attention_norm=norm("attention.output.LayerNorm"),
            intermediate=linear_("intermediate.dense"),
            output=linear_("output.dense"),
            output_norm=norm("output.LayerNorm"),
        )

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike = "bert-base-uncased", *, revision: str | None = None,
                        cache_dir: str | os.PathLike | None = None) -> Bert:
        """Load config, tokenizer and weights from a local directory or a Hugging Face hub id."""
        directory = model_dir(name_or_path, revision=revision, cache_dir=cache_dir)
        config = BertConfig.from_json(directory / "config.json")
        weights = load_weights(directory, config)
        tokenizer = Tokenizer.from_pretrained(directory) if (directory / "vocab.txt").is_file() else None
        return cls(config, weights, tokenizer, name=str(name_or_path))

    # --- the forward pass -------------------------------------------------------------------

    def embed(self, input_ids: np.ndarray, token_type_ids: np.ndarray) -> np.ndarray:
        """Token + position + segment embeddings, then LayerNorm. (batch, seq) -> (batch, seq, hidden)"""
        seq = input_ids.shape[1]
        x = self.word_embeddings[input_ids]
        x += self.position_embeddings[:seq]
        x += self.token_type_embeddings[token_type_ids]
        return layer_norm(x, self.embedding_norm, self.config.layer_norm_eps)

    def encoder_layer(self, x: np.ndarray, mask_bias: np.ndarray, layer: EncoderLayer) -> tuple[np.ndarray, np.ndarray]:
        """One transformer layer. x: (batch, seq, hidden) -> (batch, seq, hidden), probs (batch, heads, seq, seq)"""
        eps, heads = self.config.layer_norm_eps, self.config.num_attention_heads
        # Multi-head self-attention, then Add & Norm.
        q, k, v = (split_heads(linear(x, p), heads) for p in (layer.query, layer.key, layer.value))
        context, probs = attention(q, k, v, mask_bias)
        h = linear(merge_heads(context), layer.attention_output)
        h += x
        h = layer_norm(h, layer.attention_norm, eps)
        # Position-wise feed-forward network, then Add & Norm.
        f = linear(self.activation(linear(h, layer.intermediate)), layer.output)
        f += h
        return layer_norm(f, layer.output_norm, eps), probs

    def pool(self, last_hidden_state: np.ndarray) -> np.ndarray:
        """The pooler: tanh(W h_[CLS] + b). (batch, seq, hidden) -> (batch, hidden)"""
        return np.tanh(linear(last_hidden_state[:, 0], self.pooler))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, *,
                output_attentions: bool = False) -> Output:
        """Run the encoder on token ids of shape (seq,) or (batch, seq).

        token_type_ids default to 0 (one segment), attention_mask to 1 (no padding).
        """
        ids, types, mask, single = self._check_inputs(input_ids, token_type_ids, attention_mask)
        c = self.config
        batch, seq = ids.shape
        hidden_states = np.empty((c.num_hidden_layers + 1, batch, seq, c.hidden_size), np.float32)
        attentions = (np.empty((c.num_hidden_layers, batch, c.num_attention_heads, seq, seq), np.float32)
                      if output_attentions else None)
        mask_bias = attention_mask_bias(mask)
        hidden_states[0] = self.embed(ids, types)
        for i, layer in enumerate(self.layers):
            hidden_states[i + 1], probs = self.encoder_layer(hidden_states[i], mask_bias, layer)
            if output_attentions:
                attentions[i] = probs
        pooled = self.pool(hidden_states[-1])
        if single:
            hidden_states, pooled = hidden_states[:, 0], pooled[0]
            attentions = attentions[:, 0] if output_attentions else None
            ids, types, mask = ids[0], types[0], mask[0]
        return Output(ids, types, mask, hidden_states, pooled, attentions)

    def _check_inputs(self, input_ids, token_type_ids, attention_mask):
        """Validate the id arrays at the public boundary; return them as (batch, seq) int64 arrays."""
        c = self.config
        ids = _int_array("input_ids", input_ids)
        single = ids.ndim == 1
        ids = ids.reshape(1, -1) if single else ids
        types = np.zeros_like(ids) if token_type_ids is None else _int_array("token_type_ids", token_type_ids)
        mask = np.ones_like(ids) if attention_mask is None else _int_array("attention_mask", attention_mask)
        types, mask = (a.reshape(1, -1) if single else a for a in (types, mask))
        for name, a in (("token_type_ids", types), ("attention_mask", mask)):
            if a.shape != ids.shape:
                raise ValueError(f"{name} has shape {a.shape}, input_ids has shape {ids.shape}; they must match")
        if ids.shape[1] == 0 or ids.shape[0] == 0:
            raise ValueError(f"input_ids is empty (shape {ids.shape})")
        if ids.shape[1] > c.max_position_embeddings:
            raise ValueError(f"the input is {ids.shape[1]} tokens long; this model has "
                             f"{c.max_position_embeddings} positions (truncate it or use long='window')")
        for name, a, limit in (("input_ids", ids, c.vocab_size), ("token_type_ids", types, c.type_vocab_size)):
            if a.min() < 0 or a.max() >= limit:
                raise ValueError(f"{name} must lie in [0, {limit}); found values {a.min()}..{a.max()}")
        return ids, types, mask, single

    # --- text in, vectors out ------------------------------------------------------------------

    def __call__(self, text: str | list[str], text_pair: str | list[str] | None = None, *,
                 output_attentions: bool = False, max_length: int | None = None,
                 truncation: bool | str = True) -> Output:
        """Tokenize `text` (one string or a list; optionally with a second segment) and run the encoder.

        Inputs are cut to `max_length` (default: the model's positions, 512 for BERT) unless
        `truncation=False`, in which case a longer input raises a ValueError.
        """
        tokenizer = self._require_tokenizer()
        limit = self.config.max_position_embeddings
        if max_length is not None and not 1 <= max_length <= limit:
            raise ValueError(f"max_length must be between 1 and {limit}, got {max_length}")
        max_length = max_length or limit
        if isinstance(text, str):
            enc = tokenizer.encode(text, text_pair, max_length=max_length if truncation else None,
                                   truncation=truncation)
            out = self.forward(np.array(enc.ids), np.array(enc.type_ids), output_attentions=output_attentions)
            out.tokens, out.encodings = enc.tokens, [enc]
            return out
        batch = tokenizer.encode_batch(text, text_pair, max_length=max_length if truncation else None,
                                       truncation=truncation)
        out = self.forward(batch.input_ids, batch.token_type_ids, batch.attention_mask,
                           output_attentions=output_attentions)
        width = batch.input_ids.shape[1]
        out.tokens = [e.tokens + [tokenizer.convert_ids_to_tokens(tokenizer.pad_token_id)] * (width - len(e)) for e in batch.encodings]
        out.encodings = batch.encodings
        return out

    def _require_tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            raise ValueError(f"model {self.name!r} has no vocab.txt, so it can only run on token ids (forward)")
        return self.tokenizer

    def __repr__(self) -> str:
        c = self.config
        return (f"Bert({self.name!r}, layers={c.num_hidden_layers}, hidden={c.hidden_size}, "
                f"heads={c.num_attention_heads}, vocab={c.vocab_size})")


def _int_array(name: str, a) -> np.ndarray:
    """An integer array of 1 or 2 dimensions, or a TypeError / ValueError naming `name`."""
    arr = np.asarray(a)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise TypeError(f"{name} must be an array of integers, got dtype {arr.dtype}")
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape (seq,) or (batch, seq), got {arr.shape}")
    return arr.astype(np.int64, copy=False)


def load(name_or_path: str | os.PathLike = "bert-base-uncased", *, revision: str | None = None,
         cache_dir: str | os.PathLike | None = None) -> Bert:
    """Load a BERT checkpoint (a hub id such as "bert-base-uncased", or a local directory)."""
    return Bert.from_pretrained(name_or_path, revision=revision, cache_dir=cache_dir)
