"""numbert.engines.dask on a real distributed.LocalCluster (2 worker processes, 1 thread each, 127.0.0.1)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import numbert
import numbert.engines.batch_embedder

distributed = pytest.importorskip("distributed")
dask_bag = pytest.importorskip("dask.bag")
ndask = pytest.importorskip("numbert.engines.dask")


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            worker_dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def corpus(n: int) -> list[str]:
    rng = np.random.default_rng(3)
    words = "the bank river money vault café naïve 東京 data vector model sentence".split()
    return [" ".join([f"line{i}", *rng.choice(words, int(rng.choice([0, 2, 5, 12])))]) for i in range(n)]


def single_process(model, partitions: list[list[str]], **options) -> np.ndarray:
    """Each partition embedded here on one BLAS thread, as a Dask worker runs (a BLAS kernel may sum in another
    order on two threads than on one)."""
    with threadpool_limits(1):
        return np.concatenate([model.embed(p, progress=False, **options) for p in partitions])


def test_a_bag_gives_the_single_process_vectors_row_for_row(client, minilm_dir, model):
    texts = corpus(120)
    bag = dask_bag.from_sequence(texts, npartitions=5)
    vectors = ndask.embed(bag, minilm_dir, batch_size=16)
    assert vectors.shape[1] == 384 and vectors.numblocks == (5, 1)
    got = vectors.compute()
    partitions = [list(p) for p in bag.to_delayed() for p in [p.compute()]]
    assert np.array_equal(got, single_process(model, partitions, batch_size=16))
    assert np.allclose(got, model.embed(texts, progress=False), atol=2e-6)  # whole-corpus batches: same up to rounding
    loads = client.run(lambda: numbert.engines.batch_embedder._load.cache_info().misses)
    assert all(n <= 1 for n in loads.values()), loads  # once per worker, not once per task


def test_a_dataframe_column_and_files_on_an_fsspec_path(client, minilm_dir, model, tmp_path):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    texts = corpus(60)
    frame = dd.from_pandas(pd.DataFrame({"id": range(60), "text": texts}), npartitions=3)
    options = {"pooling": "cls", "normalize": True}
    got = ndask.embed(frame["text"], minilm_dir, **options).compute()
    assert np.array_equal(got, single_process(model, [texts[:20], texts[20:40], texts[40:]], **options))

    frame.to_parquet(tmp_path / "corpus.parquet")
    column = ndask.read_parquet_column(f"file://{tmp_path / 'corpus.parquet'}", "text")
    partitions = [p.compute().tolist() for p in column.to_delayed()]  # as dask-expr split the files
    assert [t for p in partitions for t in p] == texts
    assert np.array_equal(
        ndask.embed(column, minilm_dir, **options).compute(), single_process(model, partitions, **options)
    )

    for i, part in enumerate((texts[:25], texts[25:])):  # two files, Windows line endings in one
        (tmp_path / f"part{i}.txt").write_bytes(("\r\n" if i else "\n").join(part).encode() + b"\n")
    lines = ndask.read_lines(f"file://{tmp_path}/part*.txt")
    assert lines.compute() == texts
    assert np.array_equal(ndask.embed(lines, minilm_dir).compute(), single_process(model, [texts[:25], texts[25:]]))


def test_bad_input_fails_before_the_cluster_runs(minilm_dir):
    with pytest.raises(TypeError, match="texts must be a dask Bag or a dask DataFrame column"):
        ndask.embed(["a list"], minilm_dir)
    with pytest.raises(ValueError, match="pooling"):
        ndask.embed(dask_bag.from_sequence(["a"]), minilm_dir, pooling="nonsense")


def test_map_chunks_streams_in_order(client, minilm_dir, model):
    texts = corpus(90)
    chunks = [(range(i, i + 15), texts[i : i + 15]) for i in range(0, 90, 15)]
    got = list(ndask.map_chunks(client, ndask.BatchEmbedder(minilm_dir), iter(chunks), ahead=3))
    assert np.array_equal(np.concatenate(got), single_process(model, [t for _, t in chunks]))


def test_a_killed_worker_loses_no_line(client, minilm_dir, model):
    texts = corpus(480)
    bag = dask_bag.from_sequence(texts, npartitions=16)
    pids = client.run(os.getpid)
    blocks = client.compute(list(ndask.embed(bag, minilm_dir).to_delayed().ravel()))
    deadline = time.monotonic() + 120
    while not (
        busy := [
            address for address, keys in client.processing().items() if any("BatchEmbedder" in str(key) for key in keys)
        ]
    ):
        assert time.monotonic() < deadline and not all(b.done() for b in blocks), "no worker left to kill"
        time.sleep(0.005)
    os.kill(pids[busy[0]], signal.SIGKILL)  # a worker in the middle of a partition
    got = np.concatenate(client.gather(blocks))
    assert got.shape == (480, 384)
    assert pids[busy[0]] not in client.run(os.getpid).values()  # the nanny started a new worker process
    assert np.array_equal(got, single_process(model, [texts[i : i + 30] for i in range(0, 480, 30)]))
