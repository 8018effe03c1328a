"""The pipeline: one object that owns a model's tokenizer, encoder, heads and sentence config, and runs
text through them: text -> rows of token ids -> planned batches -> forwards -> answers.

    pipeline = Pipeline.from_pretrained("./all-MiniLM-L6-v2")
    out = pipeline("a text")                                 # the whole forward: an Output (hidden states)
    rows = pipeline.rows(texts, pipeline.recipe(), truncate=True)   # rows as a server queues them
    answers = pipeline.sentence_vectors(recipe)(pipeline.forward_rows(rows))   # a readout of one forward

It is text-embeddings-inference's `Infer`: every engine (the command line, the server, worker processes,
Dask, shards) calls it, or the task functions of this layer that take it (numbert.pipeline.embedding,
.reranking, .sparse, .tasks, .vocabulary), and nothing beneath it. What users load, numbert.Bert, is this
object with those tasks as methods.

Inputs too long for the model, and token ids outside its vocabulary, are refused here with the input's index
(InputTooLong, InvalidTokenId), so each engine can name the input in its own words (a server's 413 names the
request's field). Counting and cutting a long text is the tokenizer's: it tokenizes only as much of a text
as decides the answer.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from ..checkpoint.colbert_config import ColbertConfig, read_colbert_config
from ..checkpoint.hub import VOCAB_FILES, default_model, model_checkpoint
from ..checkpoint.m3_heads import M3Heads, read_m3_heads
from ..checkpoint.model_config import read_model_config
from ..checkpoint.sentence_config import (
    SentenceConfig,
    SpladePooling,
    listed_modules,
    read_sentence_config,
    recipe_directory,
    sentence_modules,
)
from ..checkpoint.weights import load_weights
from ..model import pooling
from ..model.config import BertConfig, config_file
from ..model.decoder import build_encoder
from ..model.encoder import Encoder, Output
from ..model.heads import HeadConfig, Heads
from ..model.layers import linear
from ..tokenizer import Encoding, Tokenizer
from ..tokenizer.load import SLOW_TOKENIZER_FILES, read_options
from ..tokenizer.tokenizer import alias
from . import planner, recipe
from .planner import Row, row_of, text_list
from .readouts import (
    LexicalWeights,
    M3Vectors,
    MultiVectors,
    SentenceVectors,
    SequenceLogits,
    SparseVectors,
    TokenVectors,
)
from .recipe import Recipe

log = logging.getLogger(__name__)  # once per model: its outputs are not finite (warn_if_not_finite)


class InputTooLong(ValueError):
    """Input `index` holds more tokens than `limit` (`tokens` of them, or at least that many if not `exact`)."""

    def __init__(self, index: int, tokens: int, limit: int, exact: bool = True):
        self.index, self.tokens, self.limit, self.exact = index, tokens, limit, exact
        count = str(tokens) if exact else f"at least {tokens}"
        super().__init__(f"input {index} is {count} tokens long; the model takes at most {limit}")


class TooManyTokens(ValueError):
    """The inputs up to input `index` hold `tokens` tokens in all, more than the `limit` of one call."""

    def __init__(self, index: int, tokens: int, limit: int):
        self.index, self.tokens, self.limit = index, tokens, limit
        super().__init__(f"the inputs up to input {index} are {tokens} tokens; at most {limit} are taken at once")


class InvalidTokenId(ValueError):
    """Token `position` of input `index` is `value`, not an id of the vocabulary [0, `vocab_size`)."""

    def __init__(self, index: int, position: int, value: int, vocab_size: int):
        self.index, self.position, self.value, self.vocab_size = index, position, value, vocab_size
        super().__init__(f"token {position} of input {index} is {value}, not an id of the vocabulary [0, {vocab_size})")


def warn_if_not_finite(pipeline: Pipeline, out: Output) -> Output:
    """`out`, after one warning line (once per model, on the "numbert" logger: stderr unless logging is set up) if
    its last layer holds NaN or infinity: weights or a config that are not finite make every answer NaN. Scanning
    every weight at load would cost more than the load itself (all-MiniLM-L6-v2 and bert-base, memory-mapped), so
    the load checks only when asked (check_finite=True) and each forward's last layer, a small part of its work, is
    checked here."""
    with np.errstate(invalid="ignore", over="ignore"):
        finite = bool(np.isfinite(out.hidden_states[-1].sum(dtype=np.float64)))
    if not finite and not pipeline.warned_not_finite:
        pipeline.warned_not_finite = True
        log.warning(
            "numbert: model %r computed NaN or infinite hidden states: its weights or config hold non-finite "
            "numbers; load it with check_finite=True to name the tensor",
            pipeline.name,
        )
    return out


class Pipeline:
    """A BERT encoder with its tokenizer, the task heads its checkpoint carries and, for a sentence-transformers
    model, its sentence recipe; and the path of text through them."""

    def __init__(
        self,
        encoder: Encoder,
        tokenizer: Tokenizer | None = None,
        sentence_config: SentenceConfig | None = None,
        name: str | None = None,
        head_config: HeadConfig | None = None,
        directory: Path | None = None,
        colbert: ColbertConfig | None = None,
        m3: M3Heads | None = None,
    ):
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.sentence_config = sentence_config  # a sentence-transformers directory's recipe, else None
        self.name = name
        # the checkpoint's task heads (masked LM, next sentence, classifier, QA), built when a task first needs one
        self.heads = Heads(encoder.weights, encoder.config, head_config, source=name or "model")
        self.directory = directory  # where from_pretrained found it (a TF checkpoint: its prefix): workers load it
        self.colbert = colbert  # a multi-vector (ColBERT) model's recipe: PyLate's or MultiVectorEncoder's
        self.m3 = m3  # BGE-M3's heads (colbert_linear.pt, sparse_linear.pt), else None
        self.warned_not_finite = False  # warn_if_not_finite has warned about this model

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
    ) -> Self:
        """Load config, tokenizer and weights from a local directory or a Hugging Face hub id (default:
        $NUMBERT_MODEL, else bert-base-uncased). check_finite: refuse weights holding NaN or infinity,
        naming the tensor (reads every page of the weights)."""
        name_or_path = default_model() if name_or_path is None else name_or_path
        checkpoint = model_checkpoint(name_or_path, revision=revision, cache_dir=cache_dir)
        directory = checkpoint.directory
        config, head_config = read_model_config(config_file(directory))  # config.json, or Google's bert_config.json
        weights = load_weights(checkpoint, config, check_finite=check_finite)
        listed = listed_modules(directory)  # modules.json, read once
        colbert = read_colbert_config(directory, config, sentence_modules(directory, listed))
        m3 = read_m3_heads(directory, config.hidden_size)
        has_vocab = any((directory / f).is_file() for f in (*VOCAB_FILES, *SLOW_TOKENIZER_FILES))  # (slow: refused)
        pylate = colbert is not None and colbert.library == "PyLate"
        tokenizer = load_tokenizer(directory, pylate) if has_vocab else None
        if tokenizer is not None:  # a vocabulary that does not fit the embedding table is refused here, named
            tokenizer.check_embedding_rows(config.vocab_size, str(checkpoint.location))
        root = recipe_directory(directory)  # a Router's encoder folder: the Router's directory holds the recipe
        sentence_config = read_sentence_config(root, config.hidden_size, listed if root == directory else ...)
        if sentence_config is None and m3 is not None:  # BGEM3FlagModel's dense vector: the normalized [CLS]
            sentence_config = SentenceConfig(("cls",), normalize=True)
        return cls(
            build_encoder(config, weights),
            tokenizer,
            sentence_config,
            name=str(name_or_path),
            head_config=head_config,
            directory=checkpoint.location if root == directory else root,
            colbert=colbert,
            m3=m3,
        )

    def require_tokenizer(self) -> Tokenizer:
        """The tokenizer, or a ValueError saying the model has none."""
        if self.tokenizer is None:
            raise ValueError(
                f"model {self.name!r} has no vocab.txt (nor tokenizer.json), so it can only run on token ids (forward)"
            )
        return self.tokenizer

    def recipe(self, **choices) -> Recipe:
        """This model's sentence recipe with the given choices (pooling, layers, combine, normalize, prompt,
        prompt_name, max_length, dimensions, long, stride, truncation_side, precision, ranges), checked: see
        numbert.pipeline.recipe.build. truncation_side defaults to the tokenizer's (tokenizer_config.json's)."""
        unknown = [name for name in choices if name not in recipe.CHOICES]
        if unknown:
            choices_list = ", ".join(recipe.CHOICES)
            raise TypeError(f"{unknown[0]!r} is not an option of a sentence recipe; the options are {choices_list}")
        if choices.get("truncation_side") is None:
            choices["truncation_side"] = "right" if self.tokenizer is None else self.tokenizer.truncation_side
        return recipe.build(self.config, self.sentence_config, self.encoder.pooler is not None, **choices)

    @property
    def parameter_count(self) -> int:
        """How many numbers the encoder's weights hold."""
        return sum(int(w.size) for w in self.encoder.weights.values())

    @functools.cached_property
    def unit_word_embeddings(self) -> np.ndarray:
        """The word-embedding rows scaled to unit length, computed once. (vocab, hidden)"""
        return pooling.normalize(self.encoder.word_embeddings)

    # --- ids in, hidden states out -------------------------------------------------------------------

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        *,
        output_attentions: bool = False,
        first_only: bool = False,
        every_position: bool = False,
    ) -> Output:
        """Run the encoder on token ids of shape (seq,) or (batch, seq): `Encoder.forward` (first_only: the last
        layer for each row's first token alone, for a reader of [CLS]; every_position: the positions the mask hides
        get hidden states too, as in transformers, for numbert.transformers)."""
        return self.encoder.forward(
            input_ids,
            token_type_ids,
            attention_mask,
            output_attentions=output_attentions,
            first_only=first_only,
            every_position=every_position,
        )

    def forward_rows(
        self,
        rows: Sequence[Row],
        task: str | None = None,
        *,
        output_attentions: bool = False,
        first_only: bool = False,
    ) -> Output:
        """One forward over rows of different lengths, right-padded to the longest, through `task`'s adapters
        (jina-embeddings-v3; None: none). Output arrays (batch, ...); first_only: for a readout that reads each
        row's first token alone (its `first_only`), the last layer computes that token only."""
        out = planner.forward(
            self.encoder.adapted(task), rows, output_attentions=output_attentions, first_only=first_only
        )
        return warn_if_not_finite(self, out)

    def run(
        self,
        rows: Sequence[Row],
        limit: int,
        stride: int,
        window_batch: int,
        task: str | None = None,
        first_only: bool = False,
        last_layers: int | None = None,
    ) -> Output:
        """A planned batch's Output: one forward, or for a single row over `limit` tokens its windows, stitched
        (an Output without a batch axis; with `last_layers`, of the last hidden states alone); with `task`, through
        its adapters (jina-embeddings-v3: Encoder.adapted); first_only: a forward's last layer for each row's first
        token alone (not windows)."""
        encoder = self.encoder.adapted(task)
        return warn_if_not_finite(
            self, planner.run(encoder, rows, limit, stride, window_batch, first_only, last_layers)
        )

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
        whole = isinstance(max_length, int) and not isinstance(max_length, bool)
        if max_length is not None and not (whole and 1 <= max_length <= limit):
            raise ValueError(f"max_length must be an integer between 1 and {limit}, got {max_length!r:.40}")
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
        out = self.forward_rows([row_of(e) for e in encodings], output_attentions=output_attentions)
        return with_tokens(out, encodings, tokenizer.pad_token or "")

    def windowed(self, text: str, *, stride: int = 128, max_length: int | None = None, batch_size: int = 32) -> Output:
        """Run a text of any length as overlapping windows and stitch them into one Output.

        Windows of max_length tokens (default: the model's positions, or a sentence-transformers
        max_seq_length), [CLS] and [SEP] included, share `stride` tokens with their neighbour; each
        token's hidden states are the average over the windows that contain it, so every token of a
        long document gets a vector. seq may exceed 512; pooler_output pools the averaged [CLS].
        """
        if not isinstance(text, str):
            raise TypeError(f"windowed takes one text (str), not {type(text).__name__}")
        planner.positive("batch_size", batch_size)
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
        first_only: bool = False,
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
        sentence-transformers. `pairs` is an older name of `text_pair`. first_only: each Output's last layer
        for the rows' first tokens alone, for a reader of [CLS] (`Encoder.forward`).
        """
        text_pair = alias(text_pair, pairs, "text_pair", "pairs")
        shape = self.recipe(  # lengths, lowercasing
            pooling="mean", max_length=max_length, long=long, stride=stride, truncation_side=truncation_side
        )
        lower = str.lower if shape.lowercase else str
        pad = self.require_tokenizer().pad_token or ""
        for positions, encodings in self.plan(texts, text_pair, shape, batch_size, prepare=lower):
            out = self.run([row_of(e) for e in encodings], shape.max_length, stride, batch_size, first_only=first_only)
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

    # --- inputs as a server takes them: rows within the model's length, each refused by its index ------------

    def bounded(
        self, index: int, text: str, pair: str | None, limit: int, *, truncate: bool, side: str, special: bool = True
    ) -> Encoding:
        """A prepared text's (or pair's) tokens, at most `limit` with the special tokens counted: cut there (on
        `side`) if `truncate`, else InputTooLong(index). The tokenizer reads only as much of a long text as
        decides that: `limit` tokens, or one more to learn that the text is too long."""
        tokenizer = self.require_tokenizer()
        extra = 0 if special else tokenizer.num_special_tokens(pair is not None)
        cut = limit - extra + (0 if truncate else 1)
        encoding = tokenizer.encode(
            text, pair, add_special_tokens=special, max_length=cut, truncation=True, truncation_side=side
        )
        if len(encoding) + extra > limit:
            raise InputTooLong(index, len(encoding) + extra, limit, exact=False)
        return encoding

    def rows(self, texts: Sequence[str], recipe: Recipe, *, truncate: bool, side: str | None = None) -> list[Row]:
        """A row per text as `recipe` prepares it (its prompt, lowercasing), within its max_length: cut (on `side`,
        default the recipe's) if `truncate`, else InputTooLong naming the first text too long."""
        side = side or recipe.truncation_side
        return [
            row_of(self.bounded(i, recipe.prepare(text), None, recipe.max_length, truncate=truncate, side=side))
            for i, text in enumerate(texts)
        ]

    def pair_rows(
        self, firsts: Sequence[str], seconds: Sequence[str | None], *, truncate: bool, side: str | None = None
    ) -> list[Row]:
        """A row per input of a cross-encoder, one text or a (query, document) pair, as numbert.pipeline.reranking
        tokenizes it: within pair_limit tokens, cut by longest_first (on `side`, default the tokenizer's) if
        `truncate`, else InputTooLong naming the first input too long."""
        limit, prepare = self.pair_limit(), self.segment
        side = side or self.require_tokenizer().truncation_side
        return [
            row_of(self.bounded(i, prepare(a), None if b is None else prepare(b), limit, truncate=truncate, side=side))
            for i, (a, b) in enumerate(zip(firsts, seconds))
        ]

    def id_rows(self, inputs: Sequence[Sequence[int]], limit: int) -> list[Row]:
        """Token-id inputs used as given ([CLS] and [SEP] included, as tokenize gives them): InvalidTokenId for
        an id outside the vocabulary, InputTooLong for an input over `limit` (ids are never cut)."""
        rows = []
        for i, ids in enumerate(inputs):
            if len(ids) > limit:
                raise InputTooLong(i, len(ids), limit)
            self.check_ids(i, ids)
            rows.append(Row(np.array(ids, np.int32)))
        return rows

    def check_ids(self, index: int, ids: Sequence[int]) -> None:
        """InvalidTokenId for the first id of input `index` outside the vocabulary."""
        vocab_size = self.config.vocab_size
        j = next((j for j, t in enumerate(ids) if not 0 <= t < vocab_size), None)
        if j is not None:
            raise InvalidTokenId(index, j, ids[j], vocab_size)

    def tokenize(self, texts: Sequence[str], recipe: Recipe, *, special: bool, max_tokens: int) -> list[Encoding]:
        """Each text's tokens (lowercased first if the recipe says so, no prompt), offsets into the text: at most
        the recipe's max_length tokens an input (InputTooLong beyond), `max_tokens` in all (TooManyTokens naming the
        input that passes it, with the running total)."""
        encodings, total = [], 0
        for i, text in enumerate(texts):
            prepared = text.lower() if recipe.lowercase else text
            encoding = self.bounded(i, prepared, None, recipe.max_length, truncate=False, side="right", special=special)
            total += len(encoding)
            if total > max_tokens:
                raise TooManyTokens(i, total, max_tokens)
            encodings.append(encoding)
        return encodings

    def decode(self, inputs: Sequence[Sequence[int]], skip_special_tokens: bool) -> list[str]:
        """Each list of token ids as text (the tokenizer's decoder); InvalidTokenId for an id outside the vocabulary."""
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise TypeError(f"decode takes lists of token ids, not {type(inputs).__name__}")
        for i, ids in enumerate(inputs):
            if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
                raise TypeError(f"input {i} must be a list of token ids, not {type(ids).__name__}")
            self.check_ids(i, ids)
        tokenizer = self.require_tokenizer()
        return [tokenizer.decode(ids, skip_special_tokens=skip_special_tokens) for ids in inputs]

    # --- a cross-encoder's inputs ---------------------------------------------------------------------

    def pair_limit(self, max_length: int | None = None) -> int:
        """Tokens per pair, [CLS] and both [SEP]s included: `max_length`, else CrossEncoder's (sentence_bert_config's
        max_seq_length, else the tokenizer's model_max_length), at most the model's positions."""
        positions = self.config.max_tokens
        if max_length is not None:
            if isinstance(max_length, bool) or not isinstance(max_length, int) or not 4 <= max_length <= positions:
                raise ValueError(f"max_length must be an integer between 4 and {positions}, got {max_length!r}")
            return max_length
        st = self.sentence_config
        limit = st.max_seq_length if st is not None and st.max_seq_length else self.require_tokenizer().model_max_length
        return min(limit or positions, positions)

    def segment(self, text: str) -> str:
        """How a query or a document is handed to the tokenizer: lowercased if the model's sentence_bert_config
        says do_lower_case, and "" as " " (no tokens either way), so that an empty document keeps its segment
        ([CLS] query [SEP] [SEP]) as in CrossEncoder's batch call, where Tokenizer.encode would drop it."""
        st = self.sentence_config
        lower = st is not None and st.do_lower_case
        return (text.lower() if lower else text) or " "

    # --- readouts: what a forward's rows become, each refused when the model lacks its head -----------------

    def sentence_vectors(self, recipe: Recipe) -> SentenceVectors:
        """A sentence vector per row by `recipe`, before its `finish`."""
        return SentenceVectors(recipe)

    def token_vectors(self) -> TokenVectors:
        """Every real token's vector of the last layer."""
        return TokenVectors()

    def sequence_logits(self) -> SequenceLogits:
        """The sequence classifier's logits per row; a ValueError naming the missing tensors without one."""
        return SequenceLogits(self.heads.sequence_classifier)

    def sparse_vectors(self, top_k: int | None = None) -> SparseVectors | LexicalWeights:
        """The SPLADE vector per row, its `top_k` largest weights (None: every non-zero one): the masked-LM head
        (a ValueError naming the missing tensors without one) with the directory's SpladePooling, or, for a
        checkpoint that names none, SparseEncoder's default. A BGE-M3 model's: its lexical weights."""
        if self.m3 is not None:
            return self.lexical_weights(top_k)
        st = self.sentence_config
        if st is not None and st.unsupported:
            raise ValueError(
                f"{self.name}: this sentence-transformers model has modules numbert does not run "
                f"({', '.join(st.unsupported)}), so its sparse vectors cannot be computed"
            )
        splade = st.splade if st is not None and st.splade is not None else SpladePooling()
        return SparseVectors(self.heads.masked_lm, self.config, splade, top_k)

    # --- multi-vector models (ColBERT, BGE-M3): rows and readouts ---------------------------------------

    @property
    def is_multi_vector(self) -> bool:
        """A ColBERT (PyLate, MultiVectorEncoder) or BGE-M3 model: it gives a vector per token."""
        return self.colbert is not None or self.m3 is not None

    def require_multi_vector(self) -> ColbertConfig | M3Heads:
        """The ColBERT recipe or BGE-M3's heads, or a ValueError saying the model has neither."""
        found = self.colbert if self.colbert is not None else self.m3
        if found is None:
            raise ValueError(
                f"{self.name} is not a multi-vector model: it has neither a ColBERT recipe (a PyLate or "
                f"sentence-transformers MultiVectorEncoder directory) nor BGE-M3's colbert_linear.pt"
            )
        return found

    def multi_limit(self, is_query: bool) -> int:
        """Tokens a query (or document) is cut to, markers and expansion included: the ColBERT recipe's length
        (a "min" expansion: at least its length), else the sentence config's max_seq_length, else the model's."""
        limit = self.config.max_tokens
        st = self.sentence_config
        default = min(st.max_seq_length, limit) if st is not None and st.max_seq_length else limit
        c = self.colbert
        if c is None:
            return default
        length = c.query_length if is_query else c.document_length
        length = default if length is None else min(length, limit)
        if is_query and c.expansion is not None:
            length = c.expansion.length if c.expansion.strategy == "fixed" else max(length, c.expansion.length)
        return min(length, limit)

    def multi_rows(
        self, texts: Sequence[str], *, is_query: bool, truncate: bool = True, side: str | None = None
    ) -> list[Row]:
        """A row per text as a multi-vector model reads a query (or a document), within `multi_limit` tokens: cut
        there (on `side`, default the tokenizer's) if `truncate` or the ColBERT recipe names the length, else
        InputTooLong naming the first text too long.

        ColBERT: the text with its prompt ("query" or "document": MultiVectorEncoder's markers) and lowercasing;
        PyLate's marker token inserted after [CLS]; a query shorter than the expansion length padded with the
        expansion token ([MASK]), which only reads the query unless the recipe attends to it. BGE-M3: the text."""
        c = self.require_multi_vector()
        tokenizer = self.require_tokenizer()
        side = side or tokenizer.truncation_side
        limit = self.multi_limit(is_query)
        if not isinstance(c, ColbertConfig):  # BGE-M3: the text as it is
            return [row_of(self.bounded(i, t, None, limit, truncate=truncate, side=side)) for i, t in enumerate(texts)]
        st = self.sentence_config
        prompt = self.multi_prompt(is_query)
        lower = st is not None and st.do_lower_case
        marker = c.query_marker if is_query else c.document_marker
        marker_id = None if not marker else self.token_id(marker)
        cut = truncate or (c.query_length if is_query else c.document_length) is not None or is_query and c.expansion
        rows = []
        for i, text in enumerate(texts):
            text = prompt + (text.lower() if lower else text)
            encoding = self.bounded(i, text, None, limit - (marker_id is not None), truncate=bool(cut), side=side)
            ids = np.asarray(encoding.ids, np.int32)
            if marker_id is not None:  # PyLate: [CLS] marker text [SEP]
                ids = np.concatenate([ids[:1], [marker_id], ids[1:]]).astype(np.int32)
            attended = None
            e = c.expansion
            if is_query and e is not None and len(ids) < e.length:
                expansion_id = self.token_id(e.token) if e.token is not None else tokenizer.mask_token_id
                attended = None if e.attend else len(ids)
                ids = np.concatenate([ids, np.full(e.length - len(ids), expansion_id, np.int32)])
            rows.append(Row(ids, None, attended))
        return rows

    def multi_prompt(self, is_query: bool) -> str:
        """The text put before a query (document) of a ColBERT model: MultiVectorEncoder's prompt "query"
        ("document"); PyLate's default prompt, if it names one (its markers are tokens, not prompts)."""
        st, c = self.sentence_config, self.colbert
        if st is None or c is None:
            return ""
        if c.library == "PyLate":
            return st.prompts.get(st.default_prompt_name, "") if st.default_prompt_name else ""
        return st.prompts.get("query" if is_query else "document", "")

    def token_id(self, token: str) -> int:
        """A token's id in the vocabulary, or a ValueError naming it (a ColBERT marker or expansion token)."""
        vocab = self.require_tokenizer().vocab
        if token not in vocab:
            raise ValueError(f"{self.name}: the token {token!r} its ColBERT recipe names is not in its vocabulary")
        return vocab[token]

    def multi_vectors(self, is_query: bool) -> MultiVectors:
        """The readout of a multi-vector model's queries (documents): the token vectors it keeps, projected and
        normalized; a ValueError saying so for a model that is not a multi-vector model."""
        c = self.require_multi_vector()
        if not isinstance(c, ColbertConfig):  # BGE-M3: colbert_linear on every token after [CLS]
            head = c.colbert
            return MultiVectors((lambda h: linear(h, head),), normalize=True, first=1)
        skip = np.empty(0, np.int64)
        if ("query" if is_query else "document") in c.skiplist_tasks and c.skiplist:
            tokenizer = self.require_tokenizer()
            unk = tokenizer.unk_token_id
            ids = [tokenizer.vocab.get(word, unk) for word in c.skiplist]  # words not in the vocabulary: none
            kept = {i for i, w in zip(ids, c.skiplist) if i is not None and (i != unk or w == tokenizer.unk_token)}
            skip = np.array(sorted(kept), np.int64)
        expansion = c.expansion.length if is_query and c.expansion is not None else 0
        return MultiVectors(c.projection, c.normalize, skip, expansion)

    def lexical_weights(self, top_k: int | None = None) -> LexicalWeights:
        """BGE-M3's sparse readout (its `top_k` largest weights; None: all); a ValueError for a model without
        BGE-M3's heads."""
        if self.m3 is None:
            raise ValueError(f"{self.name} has no BGE-M3 heads (colbert_linear.pt, sparse_linear.pt)")
        t = self.require_tokenizer()
        named = {t.cls_token_id, t.sep_token_id, t.pad_token_id, t.unk_token_id}
        unused = np.array(sorted(i for i in named if i is not None), np.int64)
        return LexicalWeights(self.m3.sparse, unused, top_k)

    def m3_vectors(self) -> M3Vectors:
        """BGE-M3's three outputs of one forward; a ValueError for a model without BGE-M3's heads."""
        return M3Vectors(self.lexical_weights(), self.multi_vectors(is_query=False))

    @property
    def labels(self) -> list[str]:
        """The classifier's labels (config.json's id2label, in id order)."""
        return self.heads.labels

    @property
    def is_sparse_encoder(self) -> bool:
        """A SparseEncoder (SPLADE) directory: its vectors are sparse, over the vocabulary."""
        return self.sentence_config is not None and self.sentence_config.splade is not None

    @property
    def max_active_dims(self) -> int | None:
        """The weights a sparse vector keeps: the SparseEncoder directory's max_active_dims, else None (all)."""
        return None if self.sentence_config is None else self.sentence_config.max_active_dims

    def warm_up(self) -> None:
        """One forward of the shortest input ([CLS] [SEP]), so that a first request finds the weights' pages in."""
        ids = np.array(self.require_tokenizer().encode("").ids, np.int32)
        self.forward_rows([Row(ids)])

    def __repr__(self) -> str:
        c = self.config
        return (
            f"{type(self).__name__}({self.name!r}, layers={c.num_hidden_layers}, hidden={c.hidden_size}, "
            f"heads={c.num_attention_heads}, vocab={c.vocab_size})"
        )


def load_tokenizer(directory: Path, pylate: bool) -> Tokenizer:
    """The directory's tokenizer. PyLate saves its markers ("[Q] ", "[D] ") in tokenizer.json as added tokens that
    are not special, which numbert's tokenizer does not match; numbert inserts their ids itself, and, as
    sentence-transformers does when it loads a PyLate checkpoint, registers them as special tokens (matched whole in
    the raw text, where transformers would match them in the lowercased text too)."""
    path = directory / "tokenizer.json"
    if not pylate or (directory / "vocab.txt").is_file() or not path.is_file():
        return Tokenizer.from_pretrained(directory)
    from ..tokenizer.tokenizer_json import TokenizerJson

    spec = TokenizerJson(path)
    for token in spec.spec.get("added_tokens") or []:
        if isinstance(token, dict) and token.get("special") is False:
            token["special"], token["normalized"] = True, False
    options: dict = {}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        if (directory / name).is_file():
            options |= read_options(directory / name)
    named = ("pad_token", "mask_token", "truncation_side")
    kept = {k: options[k] for k in named if k in options}
    return Tokenizer.from_tokenizer_json(spec, model_max_length=options.get("model_max_length"), **kept)


def with_tokens(out: Output, encodings: Sequence[Encoding], pad_token: str) -> Output:
    """`out` with the tokens and encodings of its inputs (a batch's rows padded with `pad_token`)."""
    if out.batched:
        width = out.input_ids.shape[1]
        out.tokens = [e.tokens + [pad_token] * (width - len(e)) for e in encodings]
    else:
        out.tokens = list(encodings[0].tokens)
    out.encodings = list(encodings)
    return out
