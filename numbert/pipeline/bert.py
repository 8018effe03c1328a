"""BERT for text: a tokenizer, the encoder, its heads and a sentence recipe, bundled. Build one with `load(...)`.

Text in, vectors out: the tokenizer makes rows of token ids, numbert.pipeline.planner batches rows of like length
and runs them through numbert.model.encoder's Encoder, and a numbert.pipeline.recipe.Recipe turns the hidden states into
sentence vectors (numbert.model.pooling holds the maths of every pooling and layer choice). The heads the
checkpoint carries (numbert.model.heads) answer the tasks of numbert.pipeline.tasks, which are also methods here:
fill_mask, is_next, classify, ner, qa, a cross-encoder's predict and rerank (numbert.pipeline.reranking) and SPLADE
sparse vectors (numbert.pipeline.sparse);
numbert.pipeline.vocabulary reads the embedding table.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..checkpoint.hub import VOCAB_FILES, default_model, model_checkpoint
from ..checkpoint.sentence_config import SentenceConfig, read_sentence_config
from ..checkpoint.weights import load_weights
from ..model import pooling
from ..model.config import BertConfig, config_file
from ..model.encoder import Encoder, Output
from ..model.heads import HeadConfig, Heads
from ..tokenizer import Encoding, Tokenizer
from ..tokenizer.tokenizer import SLOW_TOKENIZER_FILES, alias
from . import embedding, planner, recipe, reranking, sparse, tasks, vocabulary
from .planner import row_of, text_list
from .recipe import Recipe


class Bert:
    """A BERT encoder with its tokenizer, the task heads its checkpoint carries and, for a sentence-transformers
    model, its sentence recipe."""

    def __init__(
        self,
        encoder: Encoder,
        tokenizer: Tokenizer | None = None,
        sentence_config: SentenceConfig | None = None,
        name: str | None = None,
        head_config: HeadConfig | None = None,
        directory: Path | None = None,
    ):
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.sentence_config = sentence_config  # a sentence-transformers directory's recipe, else None
        self.name = name
        # the checkpoint's task heads (masked LM, next sentence, classifier, QA), built when a task first needs one
        self.heads = Heads(encoder.weights, encoder.config, head_config, source=name or "model")
        self.directory = directory  # where from_pretrained found it (a TF checkpoint: its prefix): workers load it

    @property
    def config(self) -> BertConfig:
        return self.encoder.config

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike | None = None,
        *,
        revision: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        check_finite: bool = False,
    ) -> Bert:
        """Load config, tokenizer and weights from a local directory or a Hugging Face hub id (default:
        $NUMBERT_MODEL, else bert-base-uncased). check_finite: refuse weights holding NaN or infinity,
        naming the tensor (reads every page of the weights: ~0.1 s for bert-base)."""
        name_or_path = default_model() if name_or_path is None else name_or_path
        checkpoint = model_checkpoint(name_or_path, revision=revision, cache_dir=cache_dir)
        directory = checkpoint.directory
        config = BertConfig.from_json(config_file(directory))  # config.json, or Google's bert_config.json
        weights = load_weights(checkpoint, config, check_finite=check_finite)
        has_vocab = any((directory / f).is_file() for f in (*VOCAB_FILES, *SLOW_TOKENIZER_FILES))  # (slow: refused)
        tokenizer = Tokenizer.from_pretrained(directory) if has_vocab else None
        if tokenizer is not None:  # a vocabulary that does not fit the embedding table is refused here, named
            tokenizer.check_embedding_rows(config.vocab_size, str(checkpoint.location))
        return cls(
            Encoder(config, weights),
            tokenizer,
            read_sentence_config(directory),
            name=str(name_or_path),
            head_config=HeadConfig.from_json(config_file(directory)),
            directory=checkpoint.location,
        )

    def forward(
        self, input_ids, token_type_ids=None, attention_mask=None, *, output_attentions: bool = False
    ) -> Output:
        """Run the encoder on token ids of shape (seq,) or (batch, seq): `Encoder.forward`."""
        return self.encoder.forward(input_ids, token_type_ids, attention_mask, output_attentions=output_attentions)

    # --- the heads a checkpoint carries: model.fill_mask(text) is tasks.fill_mask(model, text) ---

    fill_mask = tasks.fill_mask  # masked-LM head: top-k tokens for each [MASK]
    is_next = tasks.is_next  # next-sentence head: P(b follows a)
    classify = tasks.classify  # BertForSequenceClassification: labels and scores
    ner = tasks.ner  # BertForTokenClassification: entities with character offsets
    qa = tasks.qa  # BertForQuestionAnswering: the best answer span of a context
    predict = reranking.predict  # a cross-encoder's scores of (query, document) pairs
    rerank = reranking.rerank  # a cross-encoder's ranking of documents for a query, best first
    token_embedding = vocabulary.token_embedding  # a token's row of the word-embedding table
    nearest_tokens = vocabulary.nearest_tokens  # the vocabulary entries nearest by cosine

    # --- text in, hidden states out ------------------------------------------------------------------

    def __call__(
        self,
        text: str | list[str],
        text_pair: str | list[str] | None = None,
        *,
        output_attentions: bool = False,
        max_length: int | None = None,
        truncation: bool | str = True,
        long: str = "truncate",
        stride: int = 128,
        output_hidden_states: bool = True,
    ) -> Output:
        """Tokenize `text` (one string or a list; optionally with a second segment) and run the encoder.

        Inputs are cut to `max_length` (default: the model's positions, 512 for BERT) unless
        `truncation=False`, in which case a longer input raises a ValueError. A single text may
        instead run as overlapping windows (`long="window"`, see `windowed`), so every token gets vectors.
        An empty list gives an Output with a batch of 0. `output_hidden_states` is accepted as in
        transformers; the hidden states are always in the Output.
        """
        tokenizer = self.require_tokenizer()
        limit = self.config.max_tokens
        if max_length is not None and not 1 <= max_length <= limit:
            raise ValueError(f"max_length must be between 1 and {limit}, got {max_length}")
        recipe.check_long(long)
        if not isinstance(text, str):
            text = text_list(text, name="text")
            if text_pair is not None:
                text_pair = text_list(text_pair, name="text_pair")
        elif text_pair is not None and not isinstance(text_pair, str):
            raise TypeError(f"text is one str, so text_pair must be one str too, not {type(text_pair).__name__}")
        if long == "window":
            if not isinstance(text, str) or text_pair is not None or output_attentions:
                raise ValueError(
                    "long='window' runs one text without a pair or attentions; "
                    "for many texts use model.embed(texts, long='window')"
                )
            return self.windowed(text, stride=stride, max_length=max_length)
        cut_at = (max_length or limit) if truncation else None
        if isinstance(text, str):
            assert text_pair is None or isinstance(text_pair, str)  # checked above
            enc = tokenizer.encode(text, text_pair, max_length=cut_at, truncation=truncation)
            out = self.forward(np.array(enc.ids), np.array(enc.type_ids), output_attentions=output_attentions)
            out.tokens, out.encodings = enc.tokens, [enc]
            return out
        if not text:
            return self.encoder.empty_output(output_attentions)
        encodings = tokenizer.encode_batch(text, text_pair, max_length=cut_at, truncation=truncation).encodings
        return self.forward_encodings(encodings, output_attentions=output_attentions)

    def forward_encodings(self, encodings: Sequence[Encoding], *, output_attentions: bool = False) -> Output:
        """Run tokenizer Encodings of different lengths as one batch, right-padded to the longest."""
        tokenizer = self.require_tokenizer()
        out = planner.forward(self.encoder, [row_of(e) for e in encodings], output_attentions=output_attentions)
        return with_tokens(out, encodings, tokenizer.pad_token)

    def windowed(self, text: str, *, stride: int = 128, max_length: int | None = None, batch_size: int = 32) -> Output:
        """Run a text of any length as overlapping windows and stitch them into one Output.

        Windows of max_length tokens (default: the model's positions, or a sentence-transformers
        max_seq_length), [CLS] and [SEP] included, share `stride` tokens with their neighbour; each
        token's hidden states are the average over the windows that contain it, so every token of a
        long document gets a vector. seq may exceed 512; pooler_output pools the averaged [CLS].
        """
        if not isinstance(text, str):
            raise TypeError(f"windowed takes one text (str), not {type(text).__name__}")
        encoding = self.require_tokenizer().encode(text, max_length=None, truncation=False)
        limit = recipe.tokens_per_input(self.config, self.sentence_config, max_length)
        out = planner.run_windows(self.encoder, row_of(encoding), limit, stride, batch_size)
        return with_tokens(out, [encoding], "")

    def batches(
        self,
        texts: Sequence[str],
        text_pair: Sequence[str | None] | None = None,
        *,
        batch_size: int = 32,
        max_length: int | None = None,
        long: str = "truncate",
        stride: int = 128,
        truncation_side: str | None = None,
        pairs: Sequence[str | None] | None = None,
    ) -> Iterator[tuple[list[int], Output]]:
        """Run many texts, yielding (positions in `texts`, Output) batch by batch, longest texts first.

        Planned by numbert.pipeline.planner: texts are taken longest first by character count and tokenized
        LOOK_AHEAD batches at a time; within those, sorted by token count and batched with their
        neighbours, so a batch is padded only to its own longest text, and memory does not grow with
        the number of texts. Inputs longer than max_length tokens (default: a sentence-transformers
        max_seq_length, else the model's positions) are cut (long="truncate"; only the tokens kept are
        tokenized; at their start with truncation_side="left", default the tokenizer's), or, with
        long="window", run alone as windows, their Output then having no batch
        axis. A sentence-transformers model with do_lower_case sees lowercased text, as in
        sentence-transformers. `pairs` is an older name of `text_pair`.
        """
        text_pair = alias(text_pair, pairs, "text_pair", "pairs")
        shape = self.recipe(  # lengths, lowercasing
            pooling="mean", max_length=max_length, long=long, stride=stride, truncation_side=truncation_side
        )
        lower = str.lower if shape.lowercase else str
        pad = self.require_tokenizer().pad_token
        for positions, encodings in self.plan(texts, text_pair, shape, batch_size, prepare=lower):
            out = planner.run(self.encoder, [row_of(e) for e in encodings], shape.max_length, stride, batch_size)
            yield positions, with_tokens(out, encodings, pad)

    def plan(
        self,
        texts: Sequence[str],
        text_pair: Sequence[str | None] | None,
        recipe: Recipe,
        batch_size: int,
        *,
        prepare: Any = None,
    ) -> Iterator[tuple[list[int], list[Encoding]]]:
        """(positions, encodings) of each batch in the order they run (numbert.pipeline.planner.plan_texts), the
        texts turned into the tokenizer's text by `prepare` (default: the recipe's prompt and lowercasing)."""
        texts = text_list(texts)
        pair_list = [None] * len(texts) if text_pair is None else text_list(text_pair, none_ok=True, name="text_pair")
        if len(pair_list) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(pair_list)} pairs")
        return planner.plan_texts(
            self.require_tokenizer(),
            texts,
            pair_list,
            batch_size=planner.positive("batch_size", batch_size),
            limit=recipe.max_length,
            window=recipe.long == "window",
            side=recipe.truncation_side,
            prepare=recipe.prepare if prepare is None else prepare,
        )

    # --- text in, sentence vectors out ----------------------------------------------------------------

    def recipe(self, **choices) -> Recipe:
        """This model's sentence recipe with the given choices (pooling, layers, combine, normalize, prompt,
        prompt_name, max_length, dimensions, long, stride, truncation_side, precision, ranges), checked: see
        numbert.pipeline.recipe.build. truncation_side defaults to the tokenizer's (tokenizer_config.json's)."""
        if choices.get("truncation_side") is None:
            choices["truncation_side"] = "right" if self.tokenizer is None else self.tokenizer.truncation_side
        return recipe.build(self.config, self.sentence_config, self.encoder.pooler is not None, **choices)

    embed = embedding.embed  # sentence vectors of many texts, by a recipe
    encode = embedding.encode  # embed under sentence-transformers' names
    similarity = embedding.similarity  # the cosine of two texts' sentence vectors
    word_vectors = embedding.word_vectors  # the words of a text with their vectors
    embed_sparse = sparse.embed_sparse  # SPLADE vectors over the vocabulary (the masked-LM head), as SparseEncoder
    sparse_tokens = sparse.token_weights  # a sparse vector as {token: weight}

    @functools.cached_property
    def unit_word_embeddings(self) -> np.ndarray:
        """The word-embedding rows scaled to unit length, computed once. (vocab, hidden)"""
        return pooling.normalize(self.encoder.word_embeddings)

    def require_tokenizer(self) -> Tokenizer:
        """The tokenizer, or a ValueError saying the model has none."""
        if self.tokenizer is None:
            raise ValueError(
                f"model {self.name!r} has no vocab.txt (nor tokenizer.json), so it can only run on token ids (forward)"
            )
        return self.tokenizer

    def __repr__(self) -> str:
        c = self.config
        return (
            f"Bert({self.name!r}, layers={c.num_hidden_layers}, hidden={c.hidden_size}, "
            f"heads={c.num_attention_heads}, vocab={c.vocab_size})"
        )


def with_tokens(out: Output, encodings: Sequence[Encoding], pad_token: str) -> Output:
    """`out` with the tokens and encodings of its inputs (a batch's rows padded with `pad_token`)."""
    if out.batched:
        width = out.input_ids.shape[1]
        out.tokens = [e.tokens + [pad_token] * (width - len(e)) for e in encodings]
    else:
        out.tokens = list(encodings[0].tokens)
    out.encodings = list(encodings)
    return out


def load(
    name_or_path: str | os.PathLike | None = None,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    check_finite: bool = False,
) -> Bert:
    """Load a BERT checkpoint: a hub id such as "bert-base-uncased", or a local directory; by default
    $NUMBERT_MODEL, else bert-base-uncased (as the numbert command). See Bert.from_pretrained."""
    return Bert.from_pretrained(name_or_path, revision=revision, cache_dir=cache_dir, check_finite=check_finite)
