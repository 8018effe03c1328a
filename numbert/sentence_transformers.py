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
import os
from collections.abc import Mapping

from .pipeline import Bert, Recipe


class StBert(Bert):
    """A Bert loaded through SentenceTransformer(...): its truncate_dim applies to every encode, as
    SentenceTransformer's does; to() and fit() answer as sentence-transformers' would, or say why not."""

    truncate_dim: int | None = None
    rank = Bert.rerank  # CrossEncoder.rank's name: documents best first as {"corpus_id", "score"}

    def recipe(self, **choices) -> Recipe:
        """Bert's recipe with the model's truncate_dim, unless the call chooses its own dimensions."""
        if self.truncate_dim is not None and choices.get("dimensions") is None and choices.get("truncate_dim") is None:
            choices["truncate_dim"] = self.truncate_dim
        return super().recipe(**choices)

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
