"""numbert: BERT, the whole encoder, in NumPy.

>>> import numbert
>>> numbert.encode("Here is the sentence I want embeddings for.").shape    # the sentence vector: (hidden,)
>>> out = numbert.forward("Here is the sentence I want embeddings for.")   # the whole forward pass
>>> out.hidden_states.shape        # (layers + 1, seq, hidden)

`import numbert` loads neither NumPy nor the model code: each public name (and each submodule) is
imported on first use (PEP 562), so numbert's own processes can set BLAS's environment before NumPy
loads (numbert.runtime.blas). It sets nothing in your process.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from .model.config import BertConfig
    from .model.encoder import Output
    from .pipeline.bert import Bert, load
    from .pipeline.late_interaction import maxsim
    from .pipeline.search import semantic_search
    from .runtime.blas import threads
    from .tokenizer import Encoding, Tokenizer

__all__ = [
    "Bert",
    "BertConfig",
    "CrossEncoder",
    "Encoding",
    "MultiVectorEncoder",
    "Output",
    "SentenceTransformer",
    "SparseEncoder",
    "Tokenizer",
    "__version__",
    "encode",
    "forward",
    "load",
    "maxsim",
    "semantic_search",
    "threads",
]

_PUBLIC = {  # name -> the module that defines it, imported on first use
    "Bert": "pipeline.bert",
    "load": "pipeline.bert",
    "threads": "runtime.blas",
    "BertConfig": "model.config",
    "Output": "model.encoder",
    "semantic_search": "pipeline.search",
    "maxsim": "pipeline.late_interaction",
    "Encoding": "tokenizer",
    "Tokenizer": "tokenizer",
    "SentenceTransformer": "sentence_transformers",  # sentence-transformers' classes, as numbert models
    "CrossEncoder": "sentence_transformers",
    "SparseEncoder": "sentence_transformers",
    "MultiVectorEncoder": "sentence_transformers",
}


def __getattr__(name: str) -> Any:
    """A public name, or a submodule (numbert.model.pooling, ...), imported when first asked for."""
    if name in _PUBLIC:
        value = getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    else:
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
    from .pipeline.bert import load

    return load(name, revision=revision, cache_dir=cache_dir)


def _model(model: str | os.PathLike | Bert | None, revision: str | None, cache_dir: str | os.PathLike | None) -> Bert:
    """`model` itself if loaded, else loaded once and cached by name (default: $NUMBERT_MODEL, else
    bert-base-uncased)."""
    from .checkpoint.hub import default_model
    from .pipeline.bert import Bert

    if isinstance(model, Bert):
        return model
    name = default_model() if model is None else os.fspath(model)
    return _cached_model(name, revision, None if cache_dir is None else os.fspath(cache_dir))


def encode(
    text: str | list[str],
    model: str | os.PathLike | Bert | None = None,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    **options,
) -> np.ndarray:
    """The sentence vector of `text` by the model's own recipe, as `numbert encode TEXT` prints it and
    SentenceTransformer.encode gives it: (dim,) float32 for one str, (n, dim) for a list. The model (default:
    $NUMBERT_MODEL, else bert-base-uncased) is loaded once and cached by name.

    Keyword arguments go to `Bert.embed` (pooling, layers, normalize, max_length, prompt, dimensions, ...).
    The whole forward, every hidden state, is `numbert.forward(text)`.
    """
    return _model(model, revision, cache_dir).embed(text, **options)  # type: ignore[return-value]


def forward(
    text: str | list[str],
    model: str | os.PathLike | Bert | None = None,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    **options,
) -> Output:
    """Tokenize `text` and run it through the model: the whole forward pass, an Output with the hidden states of
    the embedding layer and of every layer, the pooler output and the tokens. The model is loaded once and
    cached by name, as for `encode`.

    Keyword arguments go to `Bert.__call__` (text_pair, output_attentions, max_length, truncation, long).
    """
    return _model(model, revision, cache_dir)(text, **options)
