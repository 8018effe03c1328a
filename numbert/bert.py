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
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import recipes, tasks
from .checkpoint import load_weights
from .config import BertConfig, config_file
from .heads import HeadConfig, Heads
from .hub import VOCAB_FILES, default_model, model_dir
from .model import Encoder, Output
from .sentence_config import SentenceConfig, read_sentence_config
from .tf_bundle import prefix_of as tf_checkpoint_prefix
from .tokenizer import Tokenizer
from .windows import run_windows, window_spans
from .workers import embed_batches


class Bert:
    """A BERT encoder with its tokenizer, the task heads its checkpoint carries and, for a sentence-transformers
    model, its sentence recipe."""

    def __init__(self, encoder: Encoder, tokenizer: Tokenizer | None = None,
                 sentence_config: SentenceConfig | None = None, name: str | None = None,
                 head_config: HeadConfig | None = None, directory: Path | None = None):
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
    def from_pretrained(cls, name_or_path: str | os.PathLike | None = None, *, revision: str | None = None,
                        cache_dir: str | os.PathLike | None = None, check_finite: bool = False) -> Bert:
        """Load config, tokenizer and weights from a local directory or a Hugging Face hub id (default:
        $NUMBERT_MODEL, else bert-base-uncased). check_finite: refuse weights holding NaN or infinity,
        naming the tensor (reads every page of the weights: ~0.1 s for bert-base)."""
        name_or_path = default_model() if name_or_path is None else name_or_path
        directory = model_dir(name_or_path, revision=revision, cache_dir=cache_dir)
        config = BertConfig.from_json(config_file(directory))  # config.json, or Google's bert_config.json
        weights = load_weights(tf_checkpoint_prefix(name_or_path) or directory, config,  # or `.../bert_model.ckpt`
                               check_finite=check_finite)
        has_vocab = any((directory / f).is_file() for f in VOCAB_FILES)  # vocab.txt, or tokenizer.json
        tokenizer = Tokenizer.from_pretrained(directory) if has_vocab else None
        return cls(Encoder(config, weights), tokenizer, read_sentence_config(directory), name=str(name_or_path),
                   head_config=HeadConfig.from_json(config_file(directory)),
                   directory=Path(os.fspath(name_or_path)) if tf_checkpoint_prefix(name_or_path) else directory)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, *,
                output_attentions: bool = False) -> Output:
        """Run the encoder on token ids of shape (seq,) or (batch, seq): `Encoder.forward`."""
        return self.encoder.forward(input_ids, token_type_ids, attention_mask, output_attentions=output_attentions)

    # --- the heads a checkpoint carries: model.fill_mask(text) is numbert.tasks.fill_mask(model, text) ----------

    fill_mask = tasks.fill_mask  # masked-LM head: top-k tokens for each [MASK]
    is_next = tasks.is_next  # next-sentence head: P(b follows a)
    classify = tasks.classify  # BertForSequenceClassification: labels and scores
    ner = tasks.ner  # BertForTokenClassification: entities with character offsets
    qa = tasks.qa  # BertForQuestionAnswering: the best answer span of a context

    # --- text in, vectors out ------------------------------------------------------------------


    def __call__(self, text: str | list[str], text_pair: str | list[str] | None = None, *,
                 output_attentions: bool = False, max_length: int | None = None,
                 truncation: bool | str = True, long: str = "truncate", stride: int = 128) -> Output:
        """Tokenize `text` (one string or a list; optionally with a second segment) and run the encoder.

        Inputs are cut to `max_length` (default: the model's positions, 512 for BERT) unless
        `truncation=False`, in which case a longer input raises a ValueError. A single text may
        instead run as overlapping windows (`long="window"`, see `windowed`), so every token gets vectors.
        """
        tokenizer = self._require_tokenizer()
        limit = self.config.max_position_embeddings
        if max_length is not None and not 1 <= max_length <= limit:
            raise ValueError(f"max_length must be between 1 and {limit}, got {max_length}")
        _check_long(long)
        if long == "window":
            if not isinstance(text, str) or text_pair is not None or output_attentions:
                raise ValueError("long='window' runs one text without a pair or attentions; "
                                 "for many texts use model.embed(texts, long='window')")
            return self.windowed(text, stride=stride, max_length=max_length)
        cut = dict(max_length=(max_length or limit) if truncation else None, truncation=truncation)
        if isinstance(text, str):
            enc = tokenizer.encode(text, text_pair, **cut)
            out = self.forward(np.array(enc.ids), np.array(enc.type_ids), output_attentions=output_attentions)
            out.tokens, out.encodings = enc.tokens, [enc]
            return out
        encodings = tokenizer.encode_batch(text, text_pair, **cut).encodings
        return self.forward_encodings(encodings, output_attentions=output_attentions)

    def _require_tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            raise ValueError(f"model {self.name!r} has no vocab.txt (nor tokenizer.json), so it can only run on "
                             f"token ids (forward)")
        return self.tokenizer

    def __repr__(self) -> str:
        c = self.config
        return (f"Bert({self.name!r}, layers={c.num_hidden_layers}, hidden={c.hidden_size}, "
                f"heads={c.num_attention_heads}, vocab={c.vocab_size})")
    # --- recipes: vectors people use, built on numbert.recipes ------------------------------------

    def embed(self, texts: str | Sequence[str], *, batch_size: int = 32, pooling: str | Sequence[str] | None = None,
              layers: str | int | Sequence[int] | None = None, combine: str | None = None,
              normalize: bool | None = None, max_length: int | None = None, long: str = "truncate",
              stride: int = 128, progress: bool | Any | None = None, prompt: str | None = None,
              prompt_name: str | None = None, workers: int | None = None) -> np.ndarray:
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
        """
        single = isinstance(texts, str)
        texts = self._text_list([texts] if single else texts)
        st = self.sentence_config
        dense = st.dense if st is not None and pooling is None else ()  # the model's own recipe only
        prefix = st.prompt(prompt, prompt_name) if st is not None else (prompt or "")
        if st is None and prompt_name is not None:
            raise ValueError("prompt_name needs a sentence-transformers model with prompts; pass prompt= instead")
        texts = [prefix + t for t in texts] if prefix else texts
        requested = {"pooling": pooling, "layers": layers, "combine": combine, "normalize": normalize}
        pooling, layers, combine, normalize = self._sentence_recipe(pooling, layers, combine, normalize)
        dim = dense[-1].weight.shape[0] if dense else self._sentence_dim(pooling, layers, combine)
        from tqdm.auto import tqdm

        own_bar = progress is None or isinstance(progress, bool)
        bar: Any = (tqdm(total=len(texts), unit="text", disable=progress is False, delay=0 if progress else 2)
                    if own_bar else progress)
        with bar if own_bar else contextlib.nullcontext():
            if workers is not None:  # the texts carry their prompt already; the recipe is resolved again there
                vectors = self._embed_in_workers(texts, workers, dim, bar.update, batch_size=batch_size,
                                                 max_length=max_length, long=long, stride=stride, prompt="",
                                                 **requested)
                return vectors[0] if single else vectors
            vectors = np.empty((len(texts), dim), np.float32)
            for positions, out in self.batches(texts, batch_size=batch_size, max_length=max_length, long=long,
                                               stride=stride):
                vector = out.sentence_vector(pooling, layers, combine)
                for layer in dense:
                    vector = layer(vector)
                vectors[positions] = vector
                bar.update(len(positions))
        if normalize:
            vectors = recipes.normalize(vectors)
        return vectors[0] if single else vectors

    def _embed_in_workers(self, texts: list[str], workers: int, dim: int, progress, **options) -> np.ndarray:
        """embed's vectors from `workers` processes, given the very batches this process would run."""
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a positive integer, got {workers!r}")
        if self.directory is None:
            raise ValueError("workers= needs a model loaded by numbert.load (from a directory or the hub): "
                             "the worker processes load it from there")
        encodings, limit = self._encodings(texts, None, options["batch_size"], options["max_length"],
                                           options["long"], options["stride"])
        plan = self.batch_plan([len(e) for e in encodings], limit, options["batch_size"])
        return embed_batches(self.directory, texts, plan, dim, workers, progress=progress, **options)

    def batches(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None, *, batch_size: int = 32,
                max_length: int | None = None, long: str = "truncate",
                stride: int = 128) -> Iterator[tuple[list[int], Output]]:
        """Run many texts, yielding (positions in `texts`, Output) batch by batch, longest texts first.

        Texts are sorted by token length and batched with their neighbours, so a batch is padded only
        to its own longest text (`batch_plan`). Inputs longer than max_length tokens (default: a
        sentence-transformers max_seq_length, else the model's positions) are cut (long="truncate"),
        or, with long="window", run alone through `windowed`, their Output then having no batch axis.
        A sentence-transformers model with do_lower_case sees lowercased text, as in sentence-transformers.
        """
        encodings, limit = self._encodings(texts, pairs, batch_size, max_length, long, stride)
        for positions in self.batch_plan([len(e) for e in encodings], limit, batch_size):
            if len(encodings[positions[0]]) <= limit:
                yield positions, self.forward_encodings([encodings[i] for i in positions])
            else:  # only with long="window"
                yield positions, run_windows(self.encoder, encodings[positions[0]], limit, stride, batch_size)

    @staticmethod
    def batch_plan(lengths: Sequence[int], limit: int, batch_size: int) -> list[list[int]]:
        """The positions of each batch `batches` runs, in order: the inputs of up to `limit` tokens longest
        first (ties in input order), `batch_size` at a time, then each longer input alone (as windows)."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable: ties keep input order
        fitting = [i for i in order if lengths[i] <= limit]
        return ([fitting[start:start + batch_size] for start in range(0, len(fitting), batch_size)]
                + [[i] for i in order if lengths[i] > limit])

    def _encodings(self, texts: Sequence[str], pairs: Sequence[str | None] | None, batch_size: int,
                   max_length: int | None, long: str, stride: int) -> tuple[list, int]:
        """Every input tokenized as `batches` runs it, and the token limit, after checking the options."""
        texts = self._text_list(texts)
        pairs = [None] * len(texts) if pairs is None else self._text_list(pairs, none_ok=True)
        if len(pairs) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(pairs)} pairs")
        _check_long(long)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        limit, window = self._max_length(max_length), long == "window"
        if window:
            window_spans(0, limit - 2, stride)  # a bad stride fails now, not at the first long text
        tokenizer = self._require_tokenizer()
        if self.sentence_config is not None and self.sentence_config.do_lower_case:
            texts, pairs = [t.lower() for t in texts], [p and p.lower() for p in pairs]
        encodings = [tokenizer.encode(t, p, max_length=None if window else limit, truncation=not window)
                     for t, p in zip(texts, pairs)]
        for i, (encoding, pair) in enumerate(zip(encodings, pairs)):
            if pair is not None and len(encoding) > limit:
                raise ValueError(f"input {i} is a pair of {len(encoding)} tokens; long='window' runs single "
                                 f"texts only (max_length is {limit})")
        return encodings, limit

    def forward_encodings(self, encodings: Sequence, *, output_attentions: bool = False) -> Output:
        """Run tokenizer Encodings of different lengths as one batch, right-padded to the longest."""
        tokenizer = self._require_tokenizer()
        batch = tokenizer.pad(encodings)
        out = self.forward(batch.input_ids, batch.token_type_ids, batch.attention_mask,
                           output_attentions=output_attentions)
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

    def word_vectors(self, text: str, *, layers: str | int | Sequence[int] = "sum_last_four", combine: str | None = None,
                     merge: str = "mean", long: str = "truncate", stride: int = 128) -> list[recipes.Word]:
        """The words of `text`, each with its character span and the merged vector of its pieces.

        >>> [(w.text, w.span) for w in model.word_vectors("Embeddings, please")]
        [('Embeddings', (0, 10)), (',', (10, 11)), ('please', (12, 18))]
        """
        if not isinstance(text, str):
            raise TypeError(f"word_vectors takes one text (str), not {type(text).__name__}")
        _check_long(long)
        out = self.windowed(text, stride=stride) if long == "window" else self(text)
        return recipes.word_vectors(out.token_vectors(layers, combine), out.encodings[0], (text,), merge)

    def similarity(self, a: str, b: str, **options) -> float:
        """The cosine similarity of two texts' sentence vectors (options as for embed)."""
        if not isinstance(a, str) or not isinstance(b, str):
            raise TypeError(f"similarity takes two texts (str), not {type(a).__name__} and {type(b).__name__}")
        u, v = self.embed([a, b], **options)
        return recipes.cosine(u, v)

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
        return [recipes.Neighbor(tokenizer.convert_ids_to_tokens(i), i, s)
                for i, s in recipes.nearest(self._unit_word_embeddings, vector, k, exclude)]

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
            raise ValueError(f"{token!r} is not one vocabulary entry: the tokenizer splits it into {pieces}; "
                             f"pass one of those pieces or its id")
        return tokenizer.vocab[pieces[0]]

    @staticmethod
    def _text_list(texts, none_ok: bool = False) -> list[str]:
        """The texts as a list of str, or a TypeError naming the first item that is not one."""
        if isinstance(texts, (str, bytes, bytearray)) or not isinstance(texts, Iterable):
            raise TypeError(f"texts must be a list of str, not {type(texts).__name__}")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str) and not (none_ok and t is None):
                raise TypeError(f"texts[{i}] is a {type(t).__name__}, not a str")
        return texts

    def _sentence_recipe(self, pooling, layers, combine, normalize) -> tuple:
        """(pooling, layers, combine, normalize): the caller's choices, else the model's defaults."""
        st = self.sentence_config
        if st is None:
            return pooling or "mean", -2 if layers is None else layers, combine, bool(normalize)
        if pooling is None and st.unsupported:
            raise ValueError(f"this sentence-transformers model has modules numbert does not run "
                             f"({', '.join(st.unsupported)}), so its own sentence vectors cannot be computed; "
                             f"pass pooling=... (and layers=...) to pool BERT's token vectors yourself")
        return (pooling or st.pooling, -1 if layers is None else layers, combine,
                st.normalize if normalize is None else bool(normalize))

    def _sentence_dim(self, pooling, layers, combine) -> int:
        """The width of a sentence vector, found by running the recipe on one zero token (validates it too)."""
        c = self.config
        zeros = np.zeros((c.num_hidden_layers + 1, 1, 1, c.hidden_size), np.float32)
        pooled = None if self.encoder.pooler is None else np.zeros((1, c.hidden_size), np.float32)
        mask = np.ones((1, 1), np.int64)
        return recipes.sentence_vectors(zeros, mask, pooling, layers, combine, pooled).shape[-1]

    def _max_length(self, max_length: int | None) -> int:
        """Tokens per input, [CLS] and [SEP] included: the caller's, a sentence-transformers max_seq_length, or all positions."""
        positions = self.config.max_position_embeddings
        if max_length is None:
            st = self.sentence_config
            return min(st.max_seq_length or positions, positions) if st else positions
        if isinstance(max_length, bool) or not isinstance(max_length, int) or not 3 <= max_length <= positions:
            raise ValueError(f"max_length must be an integer between 3 and {positions}, got {max_length!r}")
        return max_length


def _check_long(long: str) -> None:
    if long not in ("truncate", "window"):
        raise ValueError(f"long must be 'truncate' or 'window', got {long!r}")


def load(name_or_path: str | os.PathLike | None = None, *, revision: str | None = None,
         cache_dir: str | os.PathLike | None = None, check_finite: bool = False) -> Bert:
    """Load a BERT checkpoint: a hub id such as "bert-base-uncased", or a local directory; by default
    $NUMBERT_MODEL, else bert-base-uncased (as the numbert command). See Bert.from_pretrained."""
    return Bert.from_pretrained(name_or_path, revision=revision, cache_dir=cache_dir, check_finite=check_finite)
