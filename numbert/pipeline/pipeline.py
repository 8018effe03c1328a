"""The pipeline: a model's tokenizer, encoder, heads and sentence config, and the path of text through them:
text -> rows of token ids -> planned batches -> forwards -> answers. Three parts, each with one job:

    loader.py   a directory -> its parts, every file read once (`load_parts`)
    inputs.py   text -> rows: tokenizing, pairs, truncation, windows, prompts (`Inputs`)
    runner.py   rows -> a forward (or a long row's windows) -> an Output (`Runner`)

`Pipeline` composes them and keeps the face the engines call:

    pipeline = Pipeline.from_pretrained("./all-MiniLM-L6-v2")
    out = pipeline("a text")                                 # the whole forward: an Output (hidden states)
    rows = pipeline.rows(texts, pipeline.recipe(), truncate=True)   # rows as a server queues them
    answers = pipeline.sentence_vectors(recipe)(pipeline.forward_rows(rows))   # a readout of one forward

It is text-embeddings-inference's `Infer`: every engine (the command line, the server, worker processes,
Dask, shards) calls it, or the task functions of this layer that take it (numbert.pipeline.embedding,
.reranking, .sparse, .tasks, .vocabulary), and nothing beneath it. What users load, numbert.Bert, is this
object with those tasks as methods.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import numpy as np

from ..checkpoint.colbert_config import ColbertConfig
from ..checkpoint.m3_heads import M3Heads
from ..checkpoint.sentence_config import SentenceConfig, SpladePooling
from ..model.config import BertConfig
from ..model.encoder import Encoder, Output
from ..model.heads import HeadConfig, Heads
from ..model.layers import linear
from ..model.tensors import own_bytes
from ..tokenizer import Encoding, Tokenizer
from . import recipe
from .inputs import Inputs, multi_vector_kind
from .loader import load_parts
from .pair_prompt import PairPrompt
from .planner import Row, row_of
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
from .runner import Runner


class Pipeline:
    """A BERT encoder with its tokenizer, the task heads its checkpoint carries and, for a sentence-transformers
    model, its sentence recipe; and the path of text through them: `inputs` (text -> rows) and `runner` (rows ->
    an Output)."""

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
        pair_prompt: PairPrompt | None = None,
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
        self.is_multi_vector = colbert is not None or m3 is not None  # it gives a vector per token
        self.pair_prompt = pair_prompt  # a decoder reranker's (Qwen3-Reranker): a pair is one prompt, else None
        self.inputs = Inputs(self)  # text -> rows, reading this pipeline's tokenizer and recipes
        self.runner = Runner(encoder, name)  # rows -> an Output

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
        $NUMBERT_MODEL, else bert-base-uncased): numbert.pipeline.loader.load_parts. check_finite: refuse weights
        holding NaN or infinity, naming the tensor (it reads every page of the weights)."""
        parts = load_parts(name_or_path, revision=revision, cache_dir=cache_dir, check_finite=check_finite)
        return cls(**parts._asdict())

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
        if choices.get("long") == "window":
            self.inputs.window_size(None)  # a tokenizer whose windows numbert cannot frame is refused here
        return recipe.build(self.config, self.sentence_config, self.encoder.pooler is not None, **choices)

    @property
    def parameter_count(self) -> int:
        """How many numbers the encoder's weights hold."""
        return sum(int(w.size) for w in self.encoder.weights.values())

    # --- running the encoder: ids, rows, or text in; an Output out --------------------------------------

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        *,
        output_attentions: bool = False,
        one_token: str | None = None,
        every_position: bool = False,
    ) -> Output:
        """Run the encoder on token ids of shape (seq,) or (batch, seq): `Runner.forward`."""
        return self.runner.forward(
            input_ids,
            token_type_ids,
            attention_mask,
            output_attentions=output_attentions,
            one_token=one_token,
            every_position=every_position,
        )

    def forward_rows(
        self,
        rows: Sequence[Row],
        task: str | None = None,
        *,
        output_attentions: bool = False,
        one_token: str | None = None,
        last_layers: int | None = None,
    ) -> Output:
        """One forward over rows of different lengths, right-padded to the longest, through `task`'s adapters
        (jina-embeddings-v3; None: none): `Runner.run`. Output arrays (batch, ...); one_token: for a readout that
        reads one token a row (its `one_token`: "first", "last"), the last layer computes that token only;
        last_layers: only the last hidden states a readout reads are kept (its `last_layers`; None: every one)."""
        return self.runner.run(
            rows, task, output_attentions=output_attentions, one_token=one_token, last_layers=last_layers
        )

    def __call__(
        self,
        text: str | list[str],
        text_pair: str | list[str] | None = None,
        *,
        output_attentions: bool = False,
        max_length: int | None = None,
        truncation: bool | str = True,
        long: str = "truncate",
        stride: int | None = None,
        output_hidden_states: bool = True,
    ) -> Output:
        """Tokenize `text` (one string or a list; optionally with a second segment) and run the encoder.

        Inputs are cut to `max_length` (default: the model's positions, 512 for BERT) unless
        `truncation=False`, in which case a longer input raises a ValueError. A single text may instead run as
        overlapping windows (`long="window"`): windows of max_length tokens (default: the model's positions, or a
        sentence-transformers max_seq_length), [CLS] and [SEP] included, sharing `stride` tokens with their
        neighbour (default: 128, or half a window that holds no more); each token's hidden states are the average
        over the windows that contain it, so every token of a long document gets a vector (seq may exceed 512;
        pooler_output pools the averaged [CLS]).
        An empty list gives an Output with a batch of 0. `output_hidden_states` is accepted as in
        transformers; the hidden states are always in the Output.
        """
        encodings = self.inputs.encodings(
            text, text_pair, max_length=max_length, truncation=truncation, long=long, attentions=output_attentions
        )
        if long == "window":
            size = self.inputs.window_size(max_length)
            return with_tokens(self.runner.windows(row_of(encodings[0]), size, stride), encodings, "")
        if isinstance(text, str):
            (encoding,) = encodings
            ids, type_ids = np.array(encoding.ids), np.array(encoding.type_ids)
            out = self.forward(ids, type_ids, output_attentions=output_attentions)
            out.tokens, out.encodings = encoding.tokens, [encoding]
            return out
        if not encodings:
            return self.encoder.empty_output(output_attentions)
        out = self.forward_rows([row_of(e) for e in encodings], output_attentions=output_attentions)
        return with_tokens(out, encodings, self.inputs.require_tokenizer().pad_token or "")

    # --- inputs as a server takes them (Inputs): rows within the model's length, each refused by its index ----

    def require_tokenizer(self) -> Tokenizer:
        """The tokenizer, or a ValueError saying the model has none."""
        return self.inputs.require_tokenizer()

    def rows(self, texts: Sequence[str], recipe: Recipe, *, truncate: bool, side: str | None = None) -> list[Row]:
        """A row per text as `recipe` prepares it: `Inputs.rows`."""
        return self.inputs.rows(texts, recipe, truncate=truncate, side=side)

    def pair_rows(
        self, firsts: Sequence[str], seconds: Sequence[str | None], *, truncate: bool, side: str | None = None
    ) -> list[Row]:
        """A row per input of a cross-encoder: `Inputs.pair_rows`."""
        return self.inputs.pair_rows(firsts, seconds, truncate=truncate, side=side)

    def id_rows(self, inputs: Sequence[Sequence[int]], limit: int) -> list[Row]:
        """Token-id inputs used as given: `Inputs.id_rows`."""
        return self.inputs.id_rows(inputs, limit)

    def multi_rows(
        self, texts: Sequence[str], *, is_query: bool, truncate: bool = True, side: str | None = None
    ) -> list[Row]:
        """A row per text as a multi-vector model reads a query (or a document): `Inputs.multi_rows`."""
        return self.inputs.multi_rows(texts, is_query=is_query, truncate=truncate, side=side)

    def tokenize(self, texts: Sequence[str], recipe: Recipe, *, special: bool, max_tokens: int) -> list[Encoding]:
        """Each text's tokens: `Inputs.tokenize`."""
        return self.inputs.tokenize(texts, recipe, special=special, max_tokens=max_tokens)

    def decode(self, inputs: Sequence[Sequence[int]], skip_special_tokens: bool) -> list[str]:
        """Each list of token ids as text: `Inputs.decode`."""
        return self.inputs.decode(inputs, skip_special_tokens)

    # --- readouts: what a forward's rows become, each refused when the model lacks its head -----------------

    def sentence_vectors(self, recipe: Recipe) -> SentenceVectors:
        """A sentence vector per row by `recipe`, before its `finish`."""
        return SentenceVectors(recipe)

    def token_vectors(self) -> TokenVectors:
        """Every real token's vector of the last layer."""
        return TokenVectors()

    def sequence_logits(self) -> SequenceLogits:
        """The sequence classifier's logits per row; a ValueError naming the missing tensors without one (a causal-LM
        reranker without its "yes"/"no" tokens: naming them)."""
        if self.pair_prompt is not None and self.pair_prompt.refusal is not None:
            raise ValueError(f"{self.name} cannot score pairs: {self.pair_prompt.refusal}")
        return SequenceLogits(self.heads.sequence_classifier)

    def sparse_vectors(self, top_k: int | None = None) -> SparseVectors | LexicalWeights:
        """The SPLADE vector per row, its `top_k` largest weights (None: every non-zero one): the masked-LM head
        (a ValueError naming the missing tensors without one) with the directory's SpladePooling, or, for a
        checkpoint that names none, SparseEncoder's default. A BGE-M3 model's: its lexical weights."""
        if self.m3 is not None:
            return lexical_weights(self, top_k)
        st = self.sentence_config
        if st is not None and st.unsupported:
            raise ValueError(
                f"{self.name}: this sentence-transformers model has modules numbert does not run "
                f"({', '.join(st.unsupported)}), so its sparse vectors cannot be computed"
            )
        splade = st.splade if st is not None and st.splade is not None else SpladePooling()
        return SparseVectors(self.heads.masked_lm, self.config, splade, top_k)

    def multi_vectors(self, is_query: bool) -> MultiVectors:
        """The readout of a multi-vector model's queries (documents): the token vectors it keeps, projected and
        normalized; a ValueError saying so for a model that is not a multi-vector model."""
        c = multi_vector_kind(self)
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


def lexical_weights(pipeline: Pipeline, top_k: int | None = None) -> LexicalWeights:
    """BGE-M3's sparse readout (its `top_k` largest weights; None: all); a ValueError for a model without BGE-M3's
    heads."""
    if pipeline.m3 is None:
        raise ValueError(f"{pipeline.name} has no BGE-M3 heads (colbert_linear.pt, sparse_linear.pt)")
    t = pipeline.require_tokenizer()
    named = {t.cls_token_id, t.sep_token_id, t.pad_token_id, t.unk_token_id}
    unused = np.array(sorted(i for i in named if i is not None), np.int64)
    return LexicalWeights(pipeline.m3.sparse, unused, top_k)


def m3_vectors(pipeline: Pipeline) -> M3Vectors:
    """BGE-M3's three outputs of one forward; a ValueError for a model without BGE-M3's heads."""
    return M3Vectors(lexical_weights(pipeline), pipeline.multi_vectors(is_query=False))


def with_tokens(out: Output, encodings: Sequence[Encoding], pad_token: str) -> Output:
    """`out` with the tokens and encodings of its inputs (a batch's rows padded with `pad_token`)."""
    if out.batched:
        width = out.input_ids.shape[1]
        out.tokens = [e.tokens + [pad_token] * (width - len(e)) for e in encodings]
    else:
        out.tokens = list(encodings[0].tokens)
    out.encodings = list(encodings)
    return out


def own_weight_bytes(pipeline: Pipeline) -> int:
    """The bytes of the pipeline's encoder weights in the process's own memory, not mapped from the checkpoint's file
    (`tensors.own_bytes`): what each process loading the model holds for itself."""
    return own_bytes(pipeline.encoder.weights)
