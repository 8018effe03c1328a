"""A picklable batch embedder: texts -> sentence vectors, the model loaded once per process.

    embed = BatchEmbedder("/models/all-MiniLM-L6-v2", normalize=True)
    embed(["a text", "another"])           # (2, 384) float32; the first call in a process loads the model

It pickles as (model, revision, options), so an engine can ship it with every task for nothing; in
each process the first call loads the model and later calls, whatever their BatchEmbedder object,
reuse it. This is the piece numbert.engines.dask maps over partitions, and what Ray Data's map_batches or
Spark's mapInPandas call (docs/cluster.md). It imports nothing beyond numbert.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterable

import numpy as np

_load_lock = threading.Lock()  # a process with several threads still loads a model once


def loaded(model: str, revision: str | None = None):
    """The model, loaded once per process and kept for every later call."""
    with _load_lock:
        return _load(model, revision)


@functools.lru_cache(maxsize=4)
def _load(model: str, revision: str | None):
    from .. import load

    return load(model, revision=revision)


class BatchEmbedder:
    """texts -> their sentence vectors (n, dim) float32, with the model loaded once per process.

    Keyword arguments are Bert.embed's: a `recipe` (numbert.pipeline.recipe.Recipe, pickled along), or the choices
    that make one (pooling, layers, combine, normalize, max_length, long, stride, ...); and batch_size.
    """

    def __init__(self, model: str | os.PathLike, *, revision: str | None = None, **options):
        self.model, self.revision = os.fspath(model), revision
        self.options = dict(options, progress=False)

    def __call__(self, texts: Iterable[str]) -> np.ndarray:
        return loaded(self.model, self.revision).embed(list(texts), **self.options)

    @property
    def dim(self) -> int:
        """The width of the vectors (loads the model here, so a bad option fails here)."""
        return self([]).shape[1]

    def __repr__(self) -> str:
        return f"BatchEmbedder({self.model!r}, {self.options})"

    def __dask_tokenize__(self):  # Dask: the same embedder on the same partition is the same task
        recipe = self.options.get("recipe")
        options = {**self.options, "recipe": None if recipe is None else recipe.describe()}
        return self.model, self.revision, sorted(options.items(), key=str)
