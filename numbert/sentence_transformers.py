"""sentence-transformers' model classes as numbert models: code written for sentence-transformers 5/6 runs with
`from numbert import SentenceTransformer, CrossEncoder` in place of `from sentence_transformers import ...`.

    model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2", truncate_dim=256)
    vectors = model.encode(texts)            # NumPy float32, as encode(convert_to_numpy=True)
    model.similarity(vectors, vectors)

Each is numbert.load with sentence-transformers' settings applied, giving a numbert model (Bert's methods:
encode, encode_query, encode_document, similarity, predict, rank, ...). numbert runs inference on the CPU: a
device other than the CPU, .to("cuda") and fit are refused with what to do instead.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from . import util
from .pipeline import Bert, Recipe


class StBert(Bert):
    """A Bert loaded through SentenceTransformer(...): its truncate_dim applies to every encode, as
    SentenceTransformer's does; to() and fit() answer as sentence-transformers' would, or say why not."""

    truncate_dim: int | None = None
    chosen_similarity: str | None = None  # similarity_fn_name as set (None: the config's)
    rank = Bert.rerank  # CrossEncoder.rank's name: documents best first as {"corpus_id", "score"}

    def recipe(self, **choices) -> Recipe:
        """Bert's recipe with the model's truncate_dim, unless the call chooses its own dimensions."""
        if self.truncate_dim is not None and choices.get("dimensions") is None and choices.get("truncate_dim") is None:
            choices["truncate_dim"] = self.truncate_dim
        return super().recipe(**choices)

    @property
    def similarity_fn_name(self) -> str:
        """cosine, dot, euclidean or manhattan: what similarity and similarity_pairwise compute (the config's
        similarity_fn_name, default cosine)."""
        return self.chosen_similarity or configured_similarity(self)

    @similarity_fn_name.setter
    def similarity_fn_name(self, name: str) -> None:
        if name not in util.SIMILARITIES:
            raise ValueError(f"similarity_fn_name must be one of {', '.join(util.SIMILARITIES)}, not {name!r}")
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

    def to(self, device: str) -> StBert:
        """The model itself on the CPU; another device is refused (numbert runs on the CPU)."""
        check_device(device)
        return self

    def fit(self, *args, **kwargs) -> None:
        """Refused: numbert runs models, it does not train them."""
        raise NotImplementedError(
            "numbert does not train models: fit with sentence-transformers, save the model, "
            "then load its directory with numbert"
        )


def configured_similarity(model: Bert) -> str:
    """config_sentence_transformers.json's similarity_fn_name, else cosine."""
    path = Path(model.directory or ".") / "config_sentence_transformers.json"
    try:
        name = json.loads(path.read_text(encoding="utf-8")).get("similarity_fn_name")
    except (OSError, ValueError, AttributeError):
        return "cosine"
    return name if name in util.SIMILARITIES else "cosine"


def check_device(device: str | None) -> None:
    """A ValueError for a device other than the CPU (None means the CPU)."""
    if device is not None and str(device).split(":")[0] != "cpu":
        raise ValueError(f"numbert runs on the CPU, not on {device!r}: pass device='cpu' or leave it out")


def SentenceTransformer(  # noqa: N802 - sentence-transformers' class name
    model_name_or_path: str | os.PathLike | None = None,
    device: str | None = None,
    prompts: Mapping[str, str] | None = None,
    default_prompt_name: str | None = None,
    cache_folder: str | os.PathLike | None = None,
    revision: str | None = None,
    truncate_dim: int | None = None,
    **unused,
) -> StBert:
    """numbert.load(model_name_or_path) as SentenceTransformer(...) loads it: `prompts` (name -> text) added to
    the model's own, `default_prompt_name` and `truncate_dim` applied to every encode. Other sentence-transformers
    arguments (trust_remote_code, model_kwargs, ...) change nothing here."""
    check_device(device)
    model = StBert.from_pretrained(model_name_or_path, revision=revision, cache_dir=cache_folder)
    if prompts is not None or default_prompt_name is not None:
        if model.sentence_config is None:
            raise ValueError(f"{model_name_or_path}: prompts need a sentence-transformers directory")
        config = model.sentence_config
        merged = {**config.prompts, **(prompts or {})}
        name = config.default_prompt_name if default_prompt_name is None else default_prompt_name
        if name is not None and name not in merged:
            raise ValueError(f"default_prompt_name {name!r} is not one of the prompts: {', '.join(merged) or 'none'}")
        model.sentence_config = dataclasses.replace(config, prompts=merged, default_prompt_name=name)
    if truncate_dim is not None:
        model.recipe(truncate_dim=truncate_dim)  # checked now: a ValueError naming truncate_dim
        model.truncate_dim = truncate_dim
    return model


def CrossEncoder(  # noqa: N802 - sentence-transformers' class name
    model_name_or_path: str | os.PathLike,
    device: str | None = None,
    cache_folder: str | os.PathLike | None = None,
    revision: str | None = None,
    **unused,
) -> StBert:
    """numbert.load(model_name_or_path) as CrossEncoder(...) loads it: predict(pairs) and rank(query, documents)."""
    return SentenceTransformer(model_name_or_path, device=device, cache_folder=cache_folder, revision=revision)
