"""sentence-transformers' model classes as numbert models: code written for sentence-transformers 5/6 runs with
`from numbert import SentenceTransformer, CrossEncoder, SparseEncoder` in place of `from sentence_transformers import`.

    model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2", truncate_dim=256)
    vectors = model.encode(texts)            # NumPy float32, as encode(convert_to_numpy=True)
    model.similarity(vectors, vectors)

Each is numbert.load with sentence-transformers' settings applied, giving a numbert model (Bert's methods:
encode, encode_query, encode_document, similarity, predict, rank, ...). A sentence-transformers name numbert does not
carry (training, adapters, uploads, other devices and precisions) answers with what to do instead (ST_ONLY).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Self

import numpy as np

from . import util
from .pipeline import Bert, Recipe, SparseVector, maxsim, multi_vector_kind

TRAINING = "numbert runs models, it does not train them: train with sentence-transformers, save, load the directory"
ADAPTERS = "numbert runs a checkpoint's own weights: merge the adapter (peft's merge_and_unload), save, load that"
ST_ONLY = {  # sentence-transformers' names numbert does not carry -> what to do instead
    **dict.fromkeys(
        ["fit", "old_fit", "evaluate", "smart_batching_collate", "smart_batching_collate_text_only"], TRAINING
    ),
    **dict.fromkeys(["gradient_checkpointing_enable", "set_keep_in_fp32_modules"], TRAINING),
    **dict.fromkeys(
        [
            "add_adapter",
            "load_adapter",
            "set_adapter",
            "delete_adapter",
            "enable_adapters",
            "disable_adapters",
            "active_adapter",
            "active_adapters",
            "get_adapter_state_dict",
            "check_peft_compatible_model",
            "has_peft_compatible_model",
        ],
        ADAPTERS,
    ),
    **dict.fromkeys(["push_to_hub", "save_to_hub"], "numbert does not upload: model.save(path), then `hf upload`"),
    **dict.fromkeys(["half", "bfloat16"], "numbert computes in float32: util.quantize_embeddings makes small vectors"),
    **dict.fromkeys(
        ["append", "extend", "insert", "pop", "merge"],
        "numbert's modules are the directory's modules.json: edit it there, then load the directory",
    ),
    "cuda": "numbert runs on the CPU: leave the model where it is",
    **dict.fromkeys(
        ["transformers_model", "model"],
        "numbert's encoder is model.encoder (NumPy): transformers' model is never loaded",
    ),
    "get_model_kwargs": "numbert's models take no transformers keyword arguments",
    "get_sentence_features": "model.tokenize(texts) gives the tokenized batch",
    "preprocess": "model.tokenize(texts) gives the tokenized batch",
    "processor": "model.tokenizer is the model's tokenizer (numbert embeds text only)",
    "clear_placement_cache": "numbert places nothing on devices",
    "model_card_data_class": "numbert writes no model cards",
    "default_huggingface_organization": "numbert does not upload models",
    "set_pooling_include_prompt": "numbert pools as the directory's 1_Pooling/config.json says (include_prompt)",
    "splade_pooling_chunk_size": "numbert's SPLADE pooling scores tokens in blocks of its own (no chunk size)",
    **dict.fromkeys(
        ["get_default_activation_fn", "default_activation_function"],
        "predict(pairs, activation_fn=...) chooses it; by default sigmoid for one label, as CrossEncoder",
    ),
}


class Manners:
    """What a sentence-transformers model (a torch module) answers about where and how it runs: on the CPU, in
    float32, text only; and for a name numbert does not carry, an AttributeError saying what to do instead."""

    SUPPORTED_SIMILARITY_FN_NAMES = list(util.SIMILARITIES)
    device = "cpu"  # numbert runs on the CPU
    dtype = np.dtype(np.float32)  # and computes in float32
    modalities = ["text"]

    model_type = "SentenceTransformer"  # the sentence-transformers class it stands for

    @staticmethod
    def is_singular_input(inputs) -> bool:
        """Whether `inputs` is one text rather than a list of them."""
        return isinstance(inputs, str)

    def supports(self, modality: str) -> bool:
        """Whether the model embeds this modality: text only."""
        return modality == "text"

    def get_backend(self) -> str:
        """numbert's forward is NumPy's: "numpy" (sentence-transformers answers "torch", "onnx" or "openvino")."""
        return "numpy"

    def to(self, device: str) -> Self:
        """The model itself on the CPU; another device is refused (numbert runs on the CPU)."""
        check_device(device)
        return self

    def cpu(self) -> Self:
        return self

    def eval(self) -> Self:
        """The model itself: numbert only runs inference."""
        return self

    def float(self) -> Self:
        """The model itself: numbert computes in float32."""
        return self

    def train(self, mode: bool = True) -> Self:
        """train(False) is eval(); training is refused."""
        if mode:
            raise NotImplementedError(TRAINING)
        return self

    def __getattr__(self, name: str):
        """A sentence-transformers name numbert does not carry: an AttributeError saying what to do instead."""
        if name in ST_ONLY:
            raise AttributeError(f"{type(self).__name__}.{name} is sentence-transformers' alone: {ST_ONLY[name]}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class StBert(Manners, Bert):
    """A Bert loaded through SentenceTransformer(...): its truncate_dim applies to every encode, as
    SentenceTransformer's does; to() and fit() answer as sentence-transformers' would, or say why not."""

    truncate_dim: int | None = None
    chosen_similarity: str | None = None  # similarity_fn_name as set (None: the config's)
    similarities: tuple[str, ...] = tuple(util.SIMILARITIES)  # the similarity_fn_names it knows, the default first
    rank = Bert.rerank  # CrossEncoder.rank's name: documents best first as {"corpus_id", "score"}

    def recipe(self, **choices) -> Recipe:
        """Bert's recipe with the model's truncate_dim, unless the call chooses its own dimensions."""
        if self.truncate_dim is not None and choices.get("dimensions") is None and choices.get("truncate_dim") is None:
            choices["truncate_dim"] = self.truncate_dim
        return super().recipe(**choices)

    @property
    def similarity_fn_name(self) -> str:
        """cosine, dot, euclidean or manhattan: what similarity and similarity_pairwise compute (the config's
        similarity_fn_name, default cosine; a SparseEncoder's dot, a MultiVectorEncoder's maxsim)."""
        return self.chosen_similarity or configured_similarity(self, self.similarities)

    @similarity_fn_name.setter
    def similarity_fn_name(self, name: str) -> None:
        if name not in self.similarities:
            raise ValueError(f"similarity_fn_name must be one of {', '.join(self.similarities)}, not {name!r}")
        self.chosen_similarity = name

    def similarity(self, a, b, **options):
        """Bert.similarity for cosine (texts or embeddings); for another similarity_fn_name, its (n, m) scores."""
        if self.similarity_fn_name == "cosine" or isinstance(a, str):
            return super().similarity(a, b, **options)
        return util.SIMILARITIES[self.similarity_fn_name][0](a, b)

    def similarity_pairwise(self, a, b) -> np.ndarray:
        """The similarity_fn_name scores of a[i] with b[i]. -> (n,)"""
        return util.SIMILARITIES[self.similarity_fn_name][1](a, b)

    @property
    def max_seq_length(self) -> int:
        """Tokens per input, [CLS] and [SEP] included: longer inputs are cut. Settable, up to the model's positions."""
        return self.inputs.pair_limit()

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        positions = self.config.max_tokens
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= positions:
            raise ValueError(
                f"max_seq_length must be an int from 2 to the model's {positions} positions, not {value!r}"
            )
        if self.sentence_config is None:
            raise ValueError("max_seq_length is a sentence-transformers model's setting; pass max_length= to encode")
        self.sentence_config = dataclasses.replace(self.sentence_config, max_seq_length=value)

    @classmethod
    def load(cls, input_path: str | os.PathLike):
        """The model of a directory, as SentenceTransformer.load."""
        return cls.from_pretrained(input_path)

    def set_prompts(self, prompts: Mapping[str, str], default_prompt_name: str | None) -> None:
        """`prompts` (name -> text) added to the model's own; `default_prompt_name` (None: the config's) checked."""
        if self.sentence_config is None:
            raise ValueError(f"{self.name}: prompts need a sentence-transformers directory")
        config = self.sentence_config
        merged = {**config.prompts, **prompts}
        name = config.default_prompt_name if default_prompt_name is None else default_prompt_name
        if name is not None and name not in merged:
            raise ValueError(f"default_prompt_name {name!r} is not one of the prompts: {', '.join(merged) or 'none'}")
        self.sentence_config = dataclasses.replace(config, prompts=merged, default_prompt_name=name)

    def get_max_seq_length(self) -> int:
        """max_seq_length, as SentenceTransformer.get_max_seq_length."""
        return self.max_seq_length

    max_length = max_seq_length  # CrossEncoder's name for it

    @property
    def num_labels(self) -> int:
        """A cross-encoder's scores per pair (CrossEncoder.num_labels)."""
        return len(self.labels)

    # --- many processes, Matryoshka truncation, saving --------------------------------------------------

    def start_multi_process_pool(self, target_devices: Sequence[str] | None = None):
        """A pool of worker processes (one per device named, each "cpu"; default: one per core) for
        encode(..., pool=pool) and encode_multi_process; close it with stop_multi_process_pool."""
        from .engines.workers import Pool, most_workers

        for device in target_devices or []:
            check_device(device)
        if self.directory is None:
            raise ValueError("a process pool needs a model loaded from a directory or the hub")
        return Pool(self.directory, len(target_devices) if target_devices else most_workers())

    @staticmethod
    def stop_multi_process_pool(pool) -> None:
        """Stop the pool's worker processes."""
        pool.close()

    def encode(self, sentences, *args, pool=None, device=None, **options):
        """Bert.encode; with pool= (start_multi_process_pool's), in its processes; device= "cpu" or a list of them
        (one worker process each)."""
        if isinstance(device, (list, tuple)):
            with contextlib.closing(self.start_multi_process_pool(device)) as started:
                return super().encode(sentences, *args, workers=started, **options)
        check_device(device)
        return (
            super().encode(sentences, *args, **options)
            if pool is None
            else super().encode(sentences, *args, workers=pool, **options)
        )

    def encode_multi_process(self, sentences, pool, *args, **options):
        """encode(sentences, pool=pool), as sentence-transformers' deprecated encode_multi_process."""
        return self.encode(sentences, *args, pool=pool, **options)

    @contextlib.contextmanager
    def truncate_sentence_embeddings(self, truncate_dim: int | None) -> Iterator[StBert]:
        """Within the block, every encode keeps the first truncate_dim values (None: all)."""
        before, self.truncate_dim = self.truncate_dim, truncate_dim
        try:
            yield self
        finally:
            self.truncate_dim = before

    truncate_embeddings = truncate_sentence_embeddings  # its sentence-transformers 6 name

    def save(self, path: str | os.PathLike, *args, **kwargs) -> None:
        """Write the model's directory to `path`: the files it was loaded from (numbert changes no weights) with
        the settings changed since (max_seq_length, prompts, default_prompt_name, similarity_fn_name)."""
        if self.directory is None or not Path(self.directory).is_dir():
            raise ValueError(f"{self.name}: only a model loaded from a directory or the hub can be saved")
        target = Path(path)
        if target.resolve() != Path(self.directory).resolve():
            shutil.copytree(self.directory, target, dirs_exist_ok=True)
        self.write_settings(target)

    save_pretrained = save

    def write_settings(self, target: Path) -> None:
        """The sentence-transformers settings as they are now, into the directory's two config files."""
        config = self.sentence_config
        if config is None:
            return
        if config.max_seq_length is not None:
            update_json(target / "sentence_bert_config.json", {"max_seq_length": config.max_seq_length})
        settings = {"prompts": dict(config.prompts), "default_prompt_name": config.default_prompt_name}
        update_json(
            target / "config_sentence_transformers.json", settings | {"similarity_fn_name": self.similarity_fn_name}
        )


def update_json(path: Path, values: dict) -> None:
    """A JSON object file with `values` set (created if absent)."""
    try:
        current = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        current = {}
    path.write_text(json.dumps({**current, **values}, indent=2) + "\n", encoding="utf-8")


def configured_similarity(model: Bert, known: tuple[str, ...]) -> str:
    """config_sentence_transformers.json's similarity_fn_name, if one of `known`, else the first of them."""
    name = model.sentence_config.similarity_fn_name if model.sentence_config is not None else None
    return name if name in known else known[0]


def check_device(device: str | None) -> None:
    """A ValueError for a device other than the CPU (None means the CPU)."""
    if device is not None and str(device).split(":")[0] != "cpu":
        raise ValueError(f"numbert runs on the CPU, not on {device!r}: pass device='cpu' or leave it out")


class StSparse(StBert):
    """A Bert loaded through SparseEncoder(...): encode gives SPLADE vectors over the vocabulary as one dense
    (n, vocab) float32 array (SparseEncoder's sparse tensor, densified: NumPy has no sparse arrays; embed_sparse
    gives each vector's ids and weights alone), and decode, sparsity and intersection read them."""

    model_type = "SparseEncoder"
    similarities = ("dot", "cosine", "euclidean", "manhattan")
    chosen_max_active_dims: int | None = None  # SparseEncoder(max_active_dims=): the weights each vector keeps

    def encode(self, sentences, *args, max_active_dims: int | None = None, task: str | None = None, **options):
        """The texts' SPLADE vectors, (n, vocab) float32 ((vocab,) for one str); SparseEncoder.encode's arguments
        (convert_to_tensor and convert_to_sparse_tensor change nothing: the answer is a NumPy array). task: a
        Router's route ("query", "document"; None: its default route)."""
        for name in ("convert_to_tensor", "convert_to_sparse_tensor", "show_progress_bar", "save_to_cpu"):
            options.pop(name, None)
        check_device(options.pop("device", None))
        if args:
            options["prompt_name"], *rest = args
            if rest:
                options["prompt"] = rest[0]
        top_k = max_active_dims if max_active_dims is not None else self.chosen_max_active_dims
        single = isinstance(sentences, str)
        found = self.embed_sparse(sentences, top_k, route=task, **options)
        vectors: list[SparseVector] = [found] if single else found  # type: ignore[list-item,assignment]
        dense = np.zeros((len(vectors), self.config.vocab_size), np.float32)
        for row, vector in zip(dense, vectors):
            row[vector.ids] = vector.weights
        return dense[0] if single else dense

    def encode_query(self, sentences, *args, **options):
        """encode on the "query" route with the "query" prompt if the model has one, as SparseEncoder.encode_query."""
        return self.encode(sentences, *args, task="query", **role_prompt(self, "query", args, options))

    def encode_document(self, sentences, *args, **options):
        """encode on the "document" route with the "document" prompt if the model has one."""
        return self.encode(sentences, *args, task="document", **role_prompt(self, "document", args, options))

    def similarity(self, a, b, **options):
        """The similarity_fn_name scores (SparseEncoder's default: dot) of two sets of vectors, (n, m)."""
        return util.SIMILARITIES[self.similarity_fn_name][0](a, b)

    def similarity_pairwise(self, a, b) -> np.ndarray:
        return util.SIMILARITIES[self.similarity_fn_name][1](a, b)

    def get_embedding_dimension(self) -> int:
        """The vocabulary's size: a sparse vector has a weight per entry."""
        return self.config.vocab_size

    get_sentence_embedding_dimension = get_embedding_dimension

    def decode(self, embeddings, top_k: int | None = None):
        """Each vector's (token, weight) pairs, the largest weight first (top_k of them); one list for one vector."""
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0):
            raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
        vectors = vocabulary_rows(embeddings, self.config.vocab_size)
        tokenizer = self.require_tokenizer()
        decoded = []
        for row in vectors:
            ids = np.flatnonzero(row)
            ids = ids[np.argsort(-row[ids], kind="stable")][:top_k]
            decoded.append(list(zip(tokenizer.convert_ids_to_tokens(ids.tolist()), row[ids].tolist())))
        return decoded[0] if np.ndim(embeddings) == 1 else decoded

    @staticmethod
    def sparsity(embeddings) -> dict[str, float]:
        """{"active_dims": mean non-zero weights per vector, "sparsity_ratio": mean share of zero weights}."""
        vectors = np.atleast_2d(np.asarray(embeddings))
        if vectors.ndim != 2:
            raise ValueError(f"expected one vector or a 2D array of them, got {vectors.ndim} dimensions")
        if vectors.size == 0:
            return {"active_dims": 0.0, "sparsity_ratio": 1.0}
        active = np.count_nonzero(vectors, axis=1)
        return {"active_dims": float(active.mean()), "sparsity_ratio": float(1 - active.mean() / vectors.shape[1])}

    @staticmethod
    def intersection(embeddings_1, embeddings_2) -> np.ndarray:
        """The product of one vector with each of others, where both are positive (the tokens they share)."""
        one, other = np.asarray(embeddings_1, np.float32), np.asarray(embeddings_2, np.float32)
        if one.ndim != 1 or other.ndim not in (1, 2) or one.shape[-1] != other.shape[-1]:
            raise ValueError(
                f"intersection takes a (vocab,) vector and (vocab,) or (n, vocab), got {one.shape}, {other.shape}"
            )
        product = one * other
        return np.where(product > 0, product, np.float32(0))


def role_prompt(model: StBert, role: str, args: tuple, options: dict) -> dict:
    """`options` with prompt_name `role` when the caller chose no prompt and the model has a prompt of that name."""
    chosen = args or options.get("prompt") is not None or options.get("prompt_name") is not None
    prompts = model.sentence_config.prompts if model.sentence_config is not None else {}
    return options if chosen or role not in prompts else {**options, "prompt_name": role}


def vocabulary_rows(embeddings, width: int) -> np.ndarray:
    """Sparse vectors as a (n, vocab) float32 array; a ValueError for another shape."""
    rows = np.atleast_2d(np.asarray(embeddings, np.float32))
    if rows.ndim != 2 or rows.shape[1] != width:
        raise ValueError(f"expected vectors of the vocabulary's {width} weights, got shape {np.shape(embeddings)}")
    return rows


class StMulti(StBert):
    """A Bert loaded through MultiVectorEncoder(...) (or PyLate's ColBERT): a vector per token, queries and documents
    each encoded their own way; similarity is MaxSim (meanmaxsim if the directory says so)."""

    model_type = "MultiVectorEncoder"
    similarities = ("maxsim", "meanmaxsim")

    def encode(self, sentences, *args, is_query: bool = False, **options):
        """The texts' token vectors, a (tokens, dim) float32 array each, as documents (is_query=True: as queries,
        PyLate's ColBERT.encode argument). Other sentence-transformers arguments change nothing."""
        known = {"batch_size", "truncation_side"}
        return self.embed_multi(sentences, is_query, **{k: v for k, v in options.items() if k in known})

    def encode_query(self, sentences, *args, **options):
        return self.encode(sentences, is_query=True, **options)

    def encode_document(self, sentences, *args, **options):
        return self.encode(sentences, is_query=False, **options)

    def similarity(self, a, b, **options):
        """MaxSim scores of query vectors with document vectors: (queries, documents), as MultiVectorEncoder's."""
        return maxsim(a, b, length_normalize=self.similarity_fn_name == "meanmaxsim")

    rank = StBert.rank_multi  # type: ignore[assignment]  # documents best first by MaxSim with the query


class Door:
    """What makes sentence-transformers' class names classes here: calling one loads a model (its __new__), which
    is an instance of it (isinstance works, static methods such as SparseEncoder.sparsity are there)."""

    implementation: type[StBert]  # the numbert class the model is built as

    def __init__(self, *args, **kwargs) -> None:
        """Nothing more: __new__ loaded the model."""

    @classmethod
    def from_pretrained(cls, name_or_path=None, *, revision=None, cache_dir=None, check_finite: bool = False):
        model = cls.implementation.from_pretrained(
            name_or_path, revision=revision, cache_dir=cache_dir, check_finite=check_finite
        )
        model.__class__ = cls  # type: ignore[assignment]  # the name users gave it
        return model

    @classmethod
    def opened(cls, model_name_or_path, device, cache_folder, revision, check_finite: bool = False):
        """The model of a directory or hub id, on the CPU (another device is refused); check_finite: its weights'
        NaN or infinite values refused, naming the tensor (`numbert.load`'s)."""
        check_device(device)
        return cls.from_pretrained(
            model_name_or_path, revision=revision, cache_dir=cache_folder, check_finite=check_finite
        )


class SentenceTransformer(Door, StBert):
    """SentenceTransformer(model_name_or_path, ...): numbert.load(model_name_or_path) as sentence-transformers loads
    it: `prompts` (name -> text) added to the model's own, `default_prompt_name` and `truncate_dim` applied to every
    encode. check_finite=True refuses a checkpoint's NaN or infinite weights, naming the tensor (numbert.load's). Other
    sentence-transformers arguments (trust_remote_code, model_kwargs, ...) change nothing here."""

    implementation = StBert

    def __new__(
        cls,
        model_name_or_path: str | os.PathLike | None = None,
        device: str | None = None,
        prompts: Mapping[str, str] | None = None,
        default_prompt_name: str | None = None,
        cache_folder: str | os.PathLike | None = None,
        revision: str | None = None,
        truncate_dim: int | None = None,
        check_finite: bool = False,
        **unused,
    ) -> SentenceTransformer:
        model = cls.opened(model_name_or_path, device, cache_folder, revision, check_finite)
        if prompts is not None or default_prompt_name is not None:
            model.set_prompts(prompts or {}, default_prompt_name)
        if truncate_dim is not None:
            model.recipe(truncate_dim=truncate_dim)  # checked now: a ValueError naming truncate_dim
            model.truncate_dim = truncate_dim
        return model


class CrossEncoder(Door, StBert):
    """CrossEncoder(model_name_or_path, ...): numbert.load(model_name_or_path) as sentence-transformers loads it:
    predict(pairs) and rank(query, documents)."""

    implementation = StBert
    model_type = "CrossEncoder"

    def __new__(
        cls, model_name_or_path, device=None, cache_folder=None, revision=None, check_finite=False, **unused
    ) -> CrossEncoder:
        return cls.opened(model_name_or_path, device, cache_folder, revision, check_finite)


class SparseEncoder(Door, StSparse):
    """SparseEncoder(model_name_or_path, ...): a SPLADE model (a masked-LM head) as sentence-transformers loads it:
    encode, encode_query, encode_document, similarity (dot), decode, sparsity, intersection."""

    implementation = StSparse

    def __new__(
        cls,
        model_name_or_path,
        device=None,
        cache_folder=None,
        revision=None,
        max_active_dims=None,
        check_finite=False,
        **unused,
    ) -> SparseEncoder:
        model = cls.opened(model_name_or_path, device, cache_folder, revision, check_finite)
        model.sparse_vectors()  # checked now: a ValueError naming the masked-LM head's missing tensors
        if max_active_dims is not None:
            if isinstance(max_active_dims, bool) or not isinstance(max_active_dims, int) or max_active_dims < 1:
                raise ValueError(f"max_active_dims must be a positive integer, got {max_active_dims!r}")
            model.chosen_max_active_dims = max_active_dims
        return model


class MultiVectorEncoder(Door, StMulti):
    """MultiVectorEncoder(model_name_or_path, ...) (or PyLate's ColBERT): a multi-vector model as sentence-transformers
    loads it: encode_query, encode_document (token vectors), similarity (MaxSim), rank."""

    implementation = StMulti

    def __new__(
        cls, model_name_or_path, device=None, cache_folder=None, revision=None, check_finite=False, **unused
    ) -> MultiVectorEncoder:
        model = cls.opened(model_name_or_path, device, cache_folder, revision, check_finite)
        multi_vector_kind(model)  # checked now: a ValueError saying the model has no ColBERT recipe
        return model
