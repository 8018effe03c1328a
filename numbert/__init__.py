"""numbert: BERT, the whole encoder, in NumPy.

>>> import numbert
>>> out = numbert.encode("Here is the sentence I want embeddings for.")
>>> out.hidden_states.shape        # (layers + 1, seq, hidden)
"""

from __future__ import annotations

import functools
import os
import re
from importlib import metadata
from pathlib import Path

from .bert import Bert, load
from .config import BertConfig
from .hub import default_model
from .model import Output
from .search import semantic_search
from .tokenizer import Encoding, Tokenizer

__all__ = ["Bert", "BertConfig", "Encoding", "Output", "Tokenizer", "__version__", "encode", "load", "semantic_search"]


def _version() -> str:
    """The installed package's version, else (a source tree never installed) pyproject.toml's."""
    try:
        return metadata.version("numbert")
    except metadata.PackageNotFoundError:
        pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text(encoding="utf-8")
        return re.search(r'^version = "([^"]+)"', pyproject, re.MULTILINE).group(1)  # type: ignore[union-attr]


__version__ = _version()


@functools.lru_cache(maxsize=4)
def _cached_model(name: str, revision: str | None, cache_dir: str | None) -> Bert:
    return load(name, revision=revision, cache_dir=cache_dir)


def encode(
    text: str | list[str],
    model: str | os.PathLike | Bert | None = None,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    **kwargs,
) -> Output:
    """Tokenize and run `text` through `model` (default: $NUMBERT_MODEL, else bert-base-uncased),
    loading the model once and caching it by name.

    Keyword arguments go to `Bert.__call__` (text_pair, output_attentions, max_length, truncation).
    """
    if model is None:
        model = default_model()
    if not isinstance(model, Bert):
        model = _cached_model(os.fspath(model), revision, None if cache_dir is None else os.fspath(cache_dir))
    return model(text, **kwargs)
