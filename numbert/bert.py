"""BERT for text: a tokenizer, the encoder and a sentence recipe, composed. Build one with `load(...)`.

Text in, vectors out: tokenize, batch texts of similar length, run numbert.model's Encoder, and turn its
hidden states into the token, word and sentence vectors of numbert.recipes; texts longer than the model
run as windows (numbert.windows). The heads the checkpoint carries (numbert.heads) answer the tasks of
numbert.tasks, which are also methods here: fill_mask, is_next, classify, ner, qa.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import numpy as np

from . import recipes, tasks
from .checkpoint import load_weights
from .config import BertConfig, config_file
from .heads import HeadConfig, Heads
from .hub import VOCAB_FILES, default_model, model_checkpoint
from .model import Encoder, Output
from .sentence_config import Dense, SentenceConfig, read_sentence_config
from .tokenizer import Tokenizer
from .tokenizer.tokenizer import alias
from .windows import run_windows, window_spans
from .workers import embed_batches


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
        has_vocab = any((directory / f).is_file() for f in VOCAB_FILES)  # vocab.txt, or tokenizer.json
        tokenizer = Tokenizer.from_pretrained(directory) if has_vocab else None
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

    # --- the heads a checkpoint carries: model.fill_mask(text) is numbert.tasks.fill_mask(model, text) ----------

    fill_mask = tasks.fill_mask  # masked-LM head: top-k tokens for each [MASK]
    is_next = tasks.is_next  # next-sentence head: P(b follows a)
    classify = tasks.classify  # BertForSequenceClassification: labels and scores
    ner = tasks.ner  # BertForTokenClassification: entities with character offsets
    qa = tasks.qa  # BertForQuestionAnswering: the best answer span of a context

    # --- text in, vectors out ------------------------------------------------------------------

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
        tokenizer = self._require_tokenizer()
        limit = self.config.max_position_embeddings
        if max_length is not None and not 1 <= max_length <= limit:
            raise ValueError(f"max_length must be between 1 and {limit}, got {max_length}")
        _check_long(long)
        if not isinstance(text, str):
            text = self._text_list(text, name="text")
            if text_pair is not None:
                text_pair = self._text_list(text_pair, name="text_pair")
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
            return self._empty_output(output_attentions)
        encodings = tokenizer.encode_batch(text, text_pair, max_length=cut_at, truncation=truncation).encodings
        return self.forward_encodings(encodings, output_attentions=output_attentions)

    def _empty_output(self, output_attentions: bool) -> Output:
        """The Output of no texts: a batch of 0 (and no tokens)."""
        c = self.config
        ids = np.zeros((0, 0), np.int64)
        return Output(
            ids,
            ids.copy(),
            ids.copy(),
            np.zeros((c.num_hidden_layers + 1, 0, 0, c.hidden_size), np.float32),
            None if self.encoder.pooler is None else np.zeros((0, c.hidden_size), np.float32),
            np.zeros((c.num_hidden_layers, 0, c.num_attention_heads, 0, 0), np.float32) if output_attentions else None,
            tokens=[],
            encodings=[],
        )

    def _require_tokenizer(self) -> Tokenizer:
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

    # --- recipes: vectors people use, built on numbert.recipes ------------------------------------

    def embed(
        self,
        texts: str | Sequence[str],
        *,
        batch_size: int = 32,
        pooling: str | Sequence[str] | None = None,
        layers: str | int | Sequence[int] | None = None,
        combine: str | None = None,
        normalize: bool | None = None,
        max_length: int | None = None,
        long: str = "truncate",
        stride: int = 128,
        progress: bool | Any | None = None,
        prompt: str | None = None,
        prompt_name: str | None = None,
        workers: int | None = None,
        normalize_embeddings: bool | None = None,
        show_progress_bar: bool | None = None,
        convert_to_numpy: bool = True,
    ) -> np.ndarray | list[np.ndarray]:
        """Sentence vectors of many texts: (n, dim) float32 in the input order, (dim,) for one string.

        Defaults: for a sentence-transformers directory its own recipe (its pooling of the last layer,
        its Dense layers and Normalize, max_seq_length and lowercasing, its default prompt), so the
        vectors are SentenceTransformer.encode's; for a plain BERT the mean of the second-to-last
        layer, bert-as-service's default. `prompt` (a text) or `prompt_name` (one of the model's
        prompts, e.g. "query") is prepended to every text, as sentence-transformers does.
        Batching, truncation and long texts as in `batches`. A progress bar (tqdm, on stderr) shows
        once the job has run 2 s; progress=True shows it at once, progress=False never; or pass a
        tqdm bar of your own, which each batch advances (one bar over several calls).
        workers=N runs the batches in N new processes of one BLAS thread each (numbert.workers), which
        load the model from its directory: the same vectors, bit for bit, on N cores.

        sentence-transformers' names work too: `normalize_embeddings=True` is normalize=True (False
        leaves the model's own recipe, as there: a Normalize module still normalizes),
        `show_progress_bar` is `progress`, and `convert_to_numpy=False` gives a list of (dim,) arrays.
        """
        if normalize_embeddings is not None:
            if normalize is not None:
                raise TypeError("got both normalize and sentence-transformers' normalize_embeddings; pass one")
            normalize = True if normalize_embeddings else None
        progress = alias(progress, show_progress_bar, "progress", "show_progress_bar")
        single = isinstance(texts, str)
        texts = self._text_list([texts] if single else texts)
        dense = self._dense_layers(pooling)
        prefix = self._prompt(prompt, prompt_name)
        texts = [prefix + t for t in texts] if prefix else texts
        requested = {"pooling": pooling, "layers": layers, "combine": combine, "normalize": normalize}
        pooling, layers, combine, normalize = self._sentence_recipe(pooling, layers, combine, normalize)
        dim = dense[-1].weight.shape[0] if dense else self._sentence_dim(pooling, layers, combine)
        from tqdm.auto import tqdm

        own_bar = progress is None or isinstance(progress, bool)
        bar: Any = (
            tqdm(total=len(texts), unit="text", disable=progress is False, delay=0 if progress else 2)
            if own_bar
            else progress
        )
        with bar if own_bar else contextlib.nullcontext():
            if workers is not None:  # the texts carry their prompt already; the recipe is resolved again there
                vectors = self._embed_in_workers(
                    texts,
                    workers,
                    dim,
                    bar.update,
                    batch_size=batch_size,
                    max_length=max_length,
                    long=long,
                    stride=stride,
                    prompt="",
                    **requested,
                )
                return vectors[0] if single else vectors if convert_to_numpy else list(vectors)
            vectors = np.empty((len(texts), dim), np.float32)
            for positions, out in self.batches(
                texts, batch_size=batch_size, max_length=max_length, long=long, stride=stride
            ):
                vector = out.sentence_vector(pooling, layers, combine)
                for layer in dense:
                    vector = layer(vector)
                vectors[positions] = vector
                bar.update(len(positions))
        if normalize:
            vectors = recipes.normalize(vectors)
        if single:
            return vectors[0]
        return vectors if convert_to_numpy else list(vectors)

    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        convert_to_numpy: bool = True,
        normalize_embeddings: bool = False,
        **options,
    ) -> np.ndarray | list[np.ndarray]:
        """Sentence vectors, as `SentenceTransformer.encode` is called: `embed` under its names.

        Not to be confused with the module function `numbert.encode(text)`, which returns the whole
        Output (hidden states, pooler output) of one forward pass. Other keyword arguments go to `embed`.
        """
        return self.embed(
            sentences,
            batch_size=batch_size,
            show_progress_bar=show_progress_bar,
            convert_to_numpy=convert_to_numpy,
            normalize_embeddings=normalize_embeddings,
            **options,
        )

    def _embed_in_workers(self, texts: list[str], workers: int, dim: int, progress, **options) -> np.ndarray:
        """embed's vectors from `workers` processes, given the very batches this process would run."""
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a positive integer, got {workers!r}")
        if self.directory is None:
            raise ValueError(
                "workers= needs a model loaded by numbert.load (from a directory or the hub): "
                "the worker processes load it from there"
            )
        # The very batches this process would run (their positions only are kept).
        plan = [
            positions
            for positions, _ in self._planned(
                texts, None, options["batch_size"], options["max_length"], options["long"], options["stride"]
            )
        ]
        return embed_batches(self.directory, texts, plan, dim, workers, progress=progress, **options)

    def batches(
        self,
        texts: Sequence[str],
        text_pair: Sequence[str | None] | None = None,
        *,
        batch_size: int = 32,
        max_length: int | None = None,
        long: str = "truncate",
        stride: int = 128,
        pairs: Sequence[str | None] | None = None,
    ) -> Iterator[tuple[list[int], Output]]:
        """Run many texts, yielding (positions in `texts`, Output) batch by batch, longest texts first.

        Texts are taken longest first by character count and tokenized LOOK_AHEAD batches at a time;
        within those, sorted by token count and batched with their neighbours (`batch_plan`), so a
        batch is padded only to its own longest text, and memory does not grow with the number of
        texts. Inputs longer than max_length tokens (default: a sentence-transformers max_seq_length,
        else the model's positions) are cut (long="truncate"; only the tokens kept are tokenized),
        or, with long="window", run alone through `windowed`, their Output then having no batch axis.
        A sentence-transformers model with do_lower_case sees lowercased text, as in
        sentence-transformers. `pairs` is an older name of `text_pair`.
        """
        text_pair = alias(text_pair, pairs, "text_pair", "pairs")
        planned = self._planned(texts, text_pair, batch_size, max_length, long, stride)
        limit = self._max_length(max_length)
        for positions, encodings in planned:
            if len(encodings[0]) <= limit:
                yield positions, self.forward_encodings(encodings)
            else:  # only with long="window"
                yield positions, run_windows(self.encoder, encodings[0], limit, stride, batch_size)

    @staticmethod
    def batch_plan(lengths: Sequence[int], limit: int, batch_size: int) -> list[list[int]]:
        """The positions of each batch `batches` runs, in order: the inputs of up to `limit` tokens longest
        first (ties in input order), `batch_size` at a time, then each longer input alone (as windows)."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable: ties keep input order
        fitting = [i for i in order if lengths[i] <= limit]
        return [fitting[start : start + batch_size] for start in range(0, len(fitting), batch_size)] + [
            [i] for i in order if lengths[i] > limit
        ]

    def _planned(
        self,
        texts: Sequence[str],
        pairs: Sequence[str | None] | None,
        batch_size: int,
        max_length: int | None,
        long: str,
        stride: int,
    ) -> Iterator[tuple[list[int], list]]:
        """(positions, their encodings) of each batch `batches` runs, in order, after checking the options:
        the texts longest first by characters, LOOK_AHEAD batches' worth tokenized at a time and
        planned by `batch_plan`."""
        texts = self._text_list(texts)
        pair_list = [None] * len(texts) if pairs is None else self._text_list(pairs, none_ok=True, name="text_pair")
        if len(pair_list) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(pair_list)} pairs")
        _check_long(long)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        limit, window = self._max_length(max_length), long == "window"
        if window:
            window_spans(0, limit - 2, stride)  # a bad stride fails now, not at the first long text
        tokenizer = self._require_tokenizer()
        lower = self.sentence_config is not None and self.sentence_config.do_lower_case
        by_length = sorted(range(len(texts)), key=lambda i: -len(texts[i]) - len(pair_list[i] or ""))  # stable
        for block in range(0, len(texts), LOOK_AHEAD * batch_size):
            chosen = sorted(by_length[block : block + LOOK_AHEAD * batch_size])  # in input order: ties keep it
            encodings = []
            for i in chosen:
                text, pair = texts[i], pair_list[i]
                if lower:
                    text, pair = text.lower(), pair and pair.lower()
                encoding = tokenizer.encode(text, pair, max_length=None if window else limit, truncation=not window)
                if pair is not None and len(encoding) > limit:
                    raise ValueError(
                        f"input {i} is a pair of {len(encoding)} tokens; long='window' runs single "
                        f"texts only (max_length is {limit})"
                    )
                encodings.append(encoding)
            for batch in self.batch_plan([len(e) for e in encodings], limit, batch_size):
                yield [chosen[j] for j in batch], [encodings[j] for j in batch]

    def forward_encodings(self, encodings: Sequence, *, output_attentions: bool = False) -> Output:
        """Run tokenizer Encodings of different lengths as one batch, right-padded to the longest."""
        tokenizer = self._require_tokenizer()
        batch = tokenizer.pad(encodings)
        out = self.forward(
            batch.input_ids, batch.token_type_ids, batch.attention_mask, output_attentions=output_attentions
        )
        width = batch.input_ids.shape[1]
        out.tokens = [e.tokens + [tokenizer.pad_token] * (width - len(e)) for e in encodings]
        out.encodings = batch.encodings
        return out

    def windowed(self, text: str, *, stride: int = 128, max_length: int | None = None, batch_size: int = 32) -> Output:
        """Run a text of any length as overlapping windows and stitch them into one Output.

        Windows of max_length tokens (default: the model's positions, or a sentence-transformers
        max_seq_length), [CLS] and [SEP] included, share `stride` tokens with their neighbour; each
        token's hidden states are the average over the windows that contain it, so every token of a
        long document gets a vector. seq may exceed 512; pooler_output pools the averaged [CLS].
        """
        if not isinstance(text, str):
            raise TypeError(f"windowed takes one text (str), not {type(text).__name__}")
        encoding = self._require_tokenizer().encode(text, max_length=None, truncation=False)
        return run_windows(self.encoder, encoding, self._max_length(max_length), stride, batch_size)

    def word_vectors(
        self,
        text: str,
        *,
        layers: str | int | Sequence[int] = "sum_last_four",
        combine: str | None = None,
        merge: str = "mean",
        long: str = "truncate",
        stride: int = 128,
    ) -> list[recipes.Word]:
        """The words of `text`, each with its character span and the merged vector of its pieces.

        >>> [(w.text, w.span) for w in model.word_vectors("Embeddings, please")]
        [('Embeddings', (0, 10)), (',', (10, 11)), ('please', (12, 18))]
        """
        if not isinstance(text, str):
            raise TypeError(f"word_vectors takes one text (str), not {type(text).__name__}")
        _check_long(long)
        out = self.windowed(text, stride=stride) if long == "window" else self(text)
        assert out.encodings is not None  # a call on text keeps its encodings
        return recipes.word_vectors(out.token_vectors(layers, combine), out.encodings[0], (text,), merge)

    def similarity(self, a: str, b: str, **options) -> float:
        """The cosine similarity of two texts' sentence vectors (options as for embed)."""
        if not isinstance(a, str) or not isinstance(b, str):
            raise TypeError(f"similarity takes two texts (str), not {type(a).__name__} and {type(b).__name__}")
        u, v = self.embed([a, b], **options)
        return float(recipes.cosine(u, v))

    def token_embedding(self, token: str | int | Sequence[str | int]) -> np.ndarray:
        """Rows of the word-embedding matrix: no position, no segment, no LayerNorm.

        A token is a vocabulary entry ("bank", "##ing") or its id; a word the tokenizer splits into
        several pieces is refused (pass the pieces). (hidden,) for one token, (n, hidden) for a list.
        """
        if isinstance(token, (str, int, np.integer)) and not isinstance(token, bool):
            return self.encoder.word_embeddings[self._token_id(token)].copy()
        if isinstance(token, (Sequence, np.ndarray)) and not isinstance(token, bytes):
            return self.encoder.word_embeddings[[self._token_id(t) for t in token]].reshape(-1, self.config.hidden_size)
        raise TypeError(f"token must be a str, an int id or a list of them, not {type(token).__name__}")

    def nearest_tokens(self, query: str | int | np.ndarray, k: int = 10) -> list[recipes.Neighbor]:
        """The k vocabulary entries whose token embeddings are closest by cosine, best first.

        `query` is a token (itself left out of the answer), an id, or a vector of hidden_size.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        tokenizer = self._require_tokenizer()
        if isinstance(query, (str, int, np.integer)) and not isinstance(query, bool):
            exclude = [self._token_id(query)]
            vector = self.encoder.word_embeddings[exclude[0]]
        else:
            exclude, vector = [], np.asarray(query, dtype=np.float32)
            if vector.shape != (self.config.hidden_size,):
                raise ValueError(f"a query vector must have shape ({self.config.hidden_size},), got {vector.shape}")
        return [
            recipes.Neighbor(str(tokenizer.convert_ids_to_tokens(i)), i, s)
            for i, s in recipes.nearest(self._unit_word_embeddings, vector, k, exclude)
        ]

    @functools.cached_property
    def _unit_word_embeddings(self) -> np.ndarray:
        """The word-embedding rows scaled to unit length, computed once. (vocab, hidden)"""
        return recipes.normalize(self.encoder.word_embeddings)

    def _token_id(self, token: str | int) -> int:
        """The id of a vocabulary entry, or a ValueError saying how the tokenizer splits it."""
        if not isinstance(token, str):
            if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
                raise TypeError(f"a token must be a str or an int id, not {type(token).__name__}")
            if not 0 <= token < self.config.vocab_size:
                raise ValueError(f"token id {token} is outside the vocabulary [0, {self.config.vocab_size})")
            return int(token)
        tokenizer = self._require_tokenizer()
        if token in tokenizer.vocab:
            return tokenizer.vocab[token]
        pieces = tokenizer.encode(token, add_special_tokens=False).tokens
        if len(pieces) != 1:
            raise ValueError(
                f"{token!r} is not one vocabulary entry: the tokenizer splits it into {pieces}; "
                f"pass one of those pieces or its id"
            )
        return tokenizer.vocab[pieces[0]]

    @staticmethod
    def _text_list(texts, none_ok: bool = False, name: str = "texts") -> list[str]:
        """The texts as a list of str, or a TypeError naming what came instead: the first item that is
        not a str, bytes, or an unordered container (a set or dict, whose order the vectors could not keep)."""
        if isinstance(texts, (bytes, bytearray)):
            raise TypeError(
                f"{name} must be a str or a list of str, not {type(texts).__name__}; decode it first "
                f"(e.g. {name}.decode('utf-8'))"
            )
        if isinstance(texts, (AbstractSet, Mapping)):
            raise TypeError(
                f"{name} is a {type(texts).__name__}, which has no order to give the results in; "
                f"pass a list (e.g. sorted({name}))"
            )
        if isinstance(texts, str) or not isinstance(texts, Iterable):
            raise TypeError(f"{name} must be a str or a list of str, not {type(texts).__name__}")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str) and not (none_ok and t is None):
                raise TypeError(f"{name}[{i}] is a {type(t).__name__}, not a str")
        return texts

    def _sentence_recipe(self, pooling, layers, combine, normalize) -> tuple:
        """(pooling, layers, combine, normalize): the caller's choices, else the model's defaults."""
        st = self.sentence_config
        if st is None:
            return pooling or "mean", -2 if layers is None else layers, combine, bool(normalize)
        if pooling is None and st.unsupported:
            raise ValueError(
                f"this sentence-transformers model has modules numbert does not run "
                f"({', '.join(st.unsupported)}), so its own sentence vectors cannot be computed; "
                f"pass pooling=... (and layers=...) to pool BERT's token vectors yourself"
            )
        return (
            pooling or st.pooling,
            -1 if layers is None else layers,
            combine,
            st.normalize if normalize is None else bool(normalize),
        )

    def _dense_layers(self, pooling) -> tuple[Dense, ...]:
        """The Dense layers after pooling: a sentence-transformers model's own, unless the caller chose a pooling."""
        st = self.sentence_config
        return st.dense if st is not None and pooling is None else ()

    def _prompt(self, prompt: str | None, prompt_name: str | None) -> str:
        """The text prepended to every input: `prompt`, else the model's prompt `prompt_name`, else its default."""
        st = self.sentence_config
        if st is None and prompt_name is not None:
            raise ValueError("prompt_name needs a sentence-transformers model with prompts; pass prompt= instead")
        return st.prompt(prompt, prompt_name) if st is not None else (prompt or "")

    def _sentence_dim(self, pooling, layers, combine) -> int:
        """The width of a sentence vector, found by running the recipe on one zero token (validates it too)."""
        c = self.config
        zeros = np.zeros((c.num_hidden_layers + 1, 1, 1, c.hidden_size), np.float32)
        pooled = None if self.encoder.pooler is None else np.zeros((1, c.hidden_size), np.float32)
        mask = np.ones((1, 1), np.int64)
        return recipes.sentence_vectors(zeros, mask, pooling, layers, combine, pooled).shape[-1]

    def _max_length(self, max_length: int | None) -> int:
        """Tokens per input, [CLS] and [SEP] included: the caller's, a sentence-transformers
        max_seq_length, or all positions."""
        positions = self.config.max_position_embeddings
        if max_length is None:
            st = self.sentence_config
            return min(st.max_seq_length or positions, positions) if st else positions
        if isinstance(max_length, bool) or not isinstance(max_length, int) or not 3 <= max_length <= positions:
            raise ValueError(f"max_length must be an integer between 3 and {positions}, got {max_length!r}")
        return max_length


LOOK_AHEAD = 8  # batches: `batches` tokenizes this many batches' worth of texts at a time


def _check_long(long: str) -> None:
    if long not in ("truncate", "window"):
        raise ValueError(f"long must be 'truncate' or 'window', got {long!r}")


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
