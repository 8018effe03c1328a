"""Embedding on a Dask cluster (the [dask] extra): bags, DataFrame columns, files on any fsspec path.

    from dask.distributed import Client
    import numbert.engines.dask

    client = Client("tcp://scheduler:8786")
    texts = numbert.engines.dask.read_lines("s3://bucket/corpus/*.txt")        # a bag of lines
    vectors = numbert.engines.dask.embed(texts, "/shared/all-MiniLM-L6-v2")     # a dask array, one block per partition
    vectors.to_zarr(...)  /  vectors.compute()

Each Dask worker process loads the model once, on its first task, and keeps it (a `BatchEmbedder`
holds only the model's name and options; the loaded model is cached per process), so
partitions cost a forward pass each, not a load. The model must be a directory or hub name every
worker can reach. Dask's nannies already start workers with OMP/MKL/OPENBLAS_NUM_THREADS=1, so a
worker per core is the right layout (`dask worker --nworkers N --nthreads 1`). Vectors of a partition
are `Bert.embed` of that partition's texts, bit-identical to running the same partition in one
process; when a worker dies, Dask runs its partitions again elsewhere.

`numbert.engines.batch_embedder.BatchEmbedder` is a plain picklable callable (texts -> (n, dim) float32) that
needs no Dask, so the same object plugs into other engines' batch maps (Ray Data's map_batches,
Spark's mapInPandas): see docs/cluster.md.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

try:
    import dask
    import dask.array as da
    import dask.bag as db
except ImportError as e:  # pragma: no cover - only without the extra
    raise ImportError(
        "numbert.engines.dask needs Dask: pip install '.[dask]' in numbert's checkout "
        "(or pip install '/path/to/numbert[dask]')"
    ) from e

from .batch_embedder import BatchEmbedder

__all__ = ["BatchEmbedder", "embed", "map_chunks", "read_lines", "read_parquet_column"]


def embed(texts, model: str | os.PathLike | BatchEmbedder, **options) -> da.Array:
    """Sentence vectors of a Dask bag of texts or a Dask Series of texts (a DataFrame column).

    Returns a dask array (rows, dim) float32 with one block per input partition, rows in input
    order; the block lengths are unknown until computed (`.compute_chunk_sizes()`). The model is
    loaded here once to check the options and learn the width, then once per worker.
    """
    encoder = model if isinstance(model, BatchEmbedder) else BatchEmbedder(model, **options)
    if isinstance(texts, db.Bag) or (hasattr(texts, "to_delayed") and getattr(texts, "ndim", None) == 1):
        partitions = texts.to_delayed()  # a bag's or a DataFrame column's partitions
    else:
        raise TypeError(f"texts must be a dask Bag or a dask DataFrame column (Series), not {type(texts).__name__}")
    dim = encoder.dim
    embed_partition = dask.delayed(encoder, pure=True)
    blocks = [da.from_delayed(embed_partition(part), shape=(np.nan, dim), dtype=np.float32) for part in partitions]
    return da.concatenate(blocks) if blocks else da.empty((0, dim), dtype=np.float32)


def read_lines(urlpath: str | Sequence[str], *, blocksize: int | str | None = None, **storage_options) -> db.Bag:
    """The lines of text files on any fsspec path (local, s3://, gs://, hdfs://, globs) without their
    line endings, as a bag: a partition per file, or per `blocksize` bytes ("64MiB") of it."""
    bag = db.read_text(urlpath, blocksize=blocksize, encoding="utf-8", storage_options=storage_options or None)
    return bag.map(lambda line: line.removesuffix("\n").removesuffix("\r"))


def read_parquet_column(urlpath: str, column: str, **options):
    """One text column of Parquet files on any fsspec path, as a dask Series (its partitions the row groups/files)."""
    import dask.dataframe as dd

    return dd.read_parquet(urlpath, columns=[column], **options)[column]


def map_chunks(
    client, encoder: BatchEmbedder, chunks: Iterable[tuple[Sequence[int], Sequence[str]]], ahead: int | None = None
) -> Iterator[np.ndarray]:
    """Embed (lines, texts) chunks on a cluster, yielding their vectors in order, `ahead` chunks in flight
    (default: 2 per worker thread), so a stream of any length is embedded in bounded memory.

    The same contract as numbert.engines.workers.Pool.map; lost workers' chunks are rerun by Dask.
    """
    if ahead is None:
        ahead = 2 * max(1, sum(client.nthreads().values()))
    in_flight: deque = deque()
    try:
        for _, texts in chunks:
            in_flight.append(client.submit(encoder, list(texts), pure=False))
            if len(in_flight) >= ahead:
                yield in_flight.popleft().result()
        while in_flight:
            yield in_flight.popleft().result()
    finally:
        for future in in_flight:
            future.cancel()
