"""Outputs that fit an index: quantized and Matryoshka vectors equal to sentence-transformers' quantize_embeddings
and encode(precision=..., truncate_dim=...), semantic_search equal to util.semantic_search, and the commands
`numbert encode --precision --dimensions` and `numbert search`."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest
from helpers import bounded, run_limited
from test_cli import one_error_line

import numbert
from numbert.cli import main
from numbert.engines.npy import NpyIndex
from numbert.pipeline.quantization import PRECISIONS, quantize
from numbert.pipeline.search import dot_score

TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A monkey is playing drums.",
    "The bank of the river was muddy.",
    "She deposited the cheque at the bank.",
    "Paris is the capital of France.",
    "What is the capital of France?",
    "NumPy arrays are fast.",
    "Café, naïve, résumé.",
    "東京は日本の首都です。",
    "hi",
    "The quick brown fox jumps over the lazy dog. " * 4,
]
QUERIES = ["Who eats bread?", "a city in France", "music", "money"]
EXPECTED = Path(__file__).parent / "fixtures" / "retrieval_expected.npz"  # scripts/make_retrieval_fixture.py


@pytest.fixture(scope="module")
def st(torch):
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)  # "int8 buckets from few embeddings"
    return pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def st_model(st, minilm_dir):
    return st.SentenceTransformer(str(minilm_dir), device="cpu")


@pytest.fixture(scope="module")
def vectors(model) -> np.ndarray:
    return model.embed(TEXTS, progress=False)


# --- quantization ------------------------------------------------------------------------------------


@pytest.mark.parity
@pytest.mark.parametrize("precision", PRECISIONS)
def test_quantize_is_quantize_embeddings(st, vectors, precision):
    """The same bytes and dtype as quantize_embeddings, calibrated on the vectors, by ranges, by other vectors."""
    calibration = np.random.default_rng(0).normal(0, 0.06, (50, vectors.shape[1])).astype(np.float32)
    ranges = np.stack([calibration.min(0), calibration.max(0)])
    cases = [({}, {}), ({"ranges": ranges}, {"ranges": ranges})] if precision.endswith("int8") else [({}, {})]
    for theirs, ours in cases:
        want = st.quantize_embeddings(vectors, precision=precision, **theirs)
        got = quantize(vectors, precision, **ours)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    if precision.endswith("int8"):
        want = st.quantize_embeddings(vectors, precision=precision, calibration_embeddings=calibration)
        np.testing.assert_array_equal(quantize(vectors, precision, ranges), want)


@pytest.mark.parity
@pytest.mark.parametrize("precision", PRECISIONS)
def test_embed_precision_is_sentence_transformers_encode(st, st_model, model, vectors, precision):
    """embed(precision=...) quantizes the whole call's vectors: quantize_embeddings of embed's float32 vectors,
    bit for bit. Against SentenceTransformer.encode(precision=...) end to end, the float vectors differ in their
    last bits (1.4e-7 here), so a value on a bucket's edge may land one bucket over, or a sign near 0 flip:
    measured 11 of 6,144 int8 / uint8 values one bucket over, 0 of 6,144 bits flipped."""
    got = model.embed(TEXTS, precision=precision, progress=False)
    np.testing.assert_array_equal(got, st.quantize_embeddings(vectors, precision=precision))
    want = st_model.encode(TEXTS, precision=precision, batch_size=8)
    assert got.dtype == want.dtype and got.shape == want.shape
    if precision.endswith("binary"):
        flipped = np.unpackbits(got.view(np.uint8) ^ want.view(np.uint8)).sum()
        assert flipped <= 2, f"{flipped} bits differ"
    else:
        diff = np.abs(got.astype(np.int16) - want.astype(np.int16))
        assert diff.max() <= 1 and (diff > 0).mean() < 5e-3
    if precision.endswith("int8"):
        calibration = model.embed(QUERIES, progress=False)
        got = model.embed(TEXTS, precision=precision, calibration_embeddings=calibration, progress=False)
        want = st.quantize_embeddings(vectors, precision=precision, calibration_embeddings=calibration)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parity
def test_truncate_dim_renormalizes_where_sentence_transformers_cuts(st_model, model):
    """truncate_dim=d cuts, then renormalizes (the recipe normalizes): encode(truncate_dim=d,
    normalize_embeddings=True). sentence-transformers' truncate_dim alone cuts the normalized vector and
    leaves it shorter than 1: the same direction, so the same cosines."""
    got = model.embed(TEXTS, truncate_dim=128, progress=False)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1, atol=1e-6)
    want = st_model.encode(TEXTS, truncate_dim=128, normalize_embeddings=True)
    np.testing.assert_allclose(got, want, atol=1e-6)
    cut = st_model.encode(TEXTS, truncate_dim=128)
    np.testing.assert_allclose(got, cut / np.linalg.norm(cut, axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_array_equal(got, model.embed(TEXTS, dimensions=128, progress=False))
    quantized = model.embed(TEXTS, truncate_dim=128, precision="int8", progress=False)
    want = st_model.encode(TEXTS, truncate_dim=128, normalize_embeddings=True, precision="int8")
    assert np.abs(quantized.astype(np.int16) - want).max() <= 1


def test_bad_output_choices_name_the_argument(model):
    for choices, message in [
        ({"precision": "int4"}, "precision must be one of"),
        ({"truncate_dim": 385}, "truncate_dim must be an integer between 1 and the vectors' width 384"),
        ({"dimensions": 0}, "dimensions must be an integer"),
        ({"precision": "int8", "ranges": np.zeros((2, 3))}, r"ranges must have shape \(2, 384\)"),
        ({"precision": "binary", "ranges": np.zeros((2, 384))}, "ranges apply to precision int8 and uint8"),
        ({"precision": "int8", "calibration_embeddings": np.zeros((4, 3))}, "calibration_embeddings must be"),
    ]:
        with pytest.raises(ValueError, match=message):
            model.embed(TEXTS[:2], **choices)
    with pytest.raises(TypeError, match="truncate_dim"):
        model.embed(TEXTS[:2], truncate_dim=8, dimensions=8)
    with pytest.raises(ValueError, match="single vector: pass ranges="):
        model.embed("one text", precision="uint8")
    assert model.embed("one text", precision="uint8", ranges=np.ones((2, 384))).shape == (384,)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_quantize_matches_the_committed_quantize_embeddings_outputs(precision):
    """Without torch: quantize_embeddings' outputs in tests/fixtures, calibrated on the vectors and by ranges."""
    expected = np.load(EXPECTED)
    vectors = expected["corpus"][:20]
    cases = [({}, ""), ({"ranges": expected["ranges"]}, "_ranges")] if precision.endswith("int8") else [({}, "")]
    for options, suffix in cases:
        want = expected[f"quantized_{precision}{suffix}"]
        got = quantize(vectors, precision, **options)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


# --- semantic search ---------------------------------------------------------------------------------


def assert_same_hits(ours: list, theirs: list, queries: np.ndarray, corpus: np.ndarray, cosine: bool = True):
    """Each query's hits: scores within 1e-6 (relative for dot products, which float32 holds to 1e-7 of their
    size) of theirs position by position and of the true (float64) scores; ids equal, except among scores tied
    within that, which sentence-transformers orders arbitrarily: a tied run holds the same ids, and one cut by
    top_k only ids of that score."""
    a, b = queries.astype(np.float64), corpus.astype(np.float64)
    if cosine:
        a, b = a / np.linalg.norm(a, axis=1, keepdims=True), b / np.linalg.norm(b, axis=1, keepdims=True)
    true = a @ b.T
    tolerance = {"atol": 1e-6, "rtol": 0} if cosine else {"atol": 0, "rtol": 1e-6}
    assert len(ours) == len(theirs)
    for q, (mine, want) in enumerate(zip(ours, theirs)):
        assert len(mine) == len(want)
        ids, scores = [h["corpus_id"] for h in mine], np.array([h["score"] for h in mine])
        np.testing.assert_allclose(scores, [h["score"] for h in want], **tolerance)
        np.testing.assert_allclose(scores, true[q, ids], **tolerance)
        start = 0
        for end in range(1, len(want) + 1):
            gap = want[end - 1]["score"] - want[end]["score"] if end < len(want) else np.inf
            if gap > 1e-6 * (1 if cosine else abs(want[end - 1]["score"])):
                if end < len(want):  # a whole tied run; the last may be cut by top_k
                    assert set(ids[start:end]) == {h["corpus_id"] for h in want[start:end]}
                start = end


@pytest.mark.parity
@pytest.mark.parametrize(
    ("top_k", "chunks"), [(1, {}), (10, {}), (10, {"query_chunk_size": 3, "corpus_chunk_size": 97})]
)
def test_semantic_search_is_util_semantic_search_on_random_vectors(st, torch, top_k, chunks):
    rng = np.random.default_rng(0)
    queries, corpus = rng.normal(size=(7, 32)).astype(np.float32), rng.normal(size=(1000, 32)).astype(np.float32)
    want = st.util.semantic_search(torch.from_numpy(queries), torch.from_numpy(corpus), top_k=top_k)
    got = numbert.semantic_search(queries, corpus, top_k=top_k, **chunks)
    assert_same_hits(got, want, queries, corpus)
    assert [[h["corpus_id"] for h in hits] for hits in got] == [[h["corpus_id"] for h in hits] for hits in want]
    want = st.util.semantic_search(
        torch.from_numpy(queries), torch.from_numpy(corpus), top_k=top_k, score_function=st.util.dot_score
    )
    got = numbert.semantic_search(queries, corpus, top_k=top_k, score_function=dot_score, **chunks)
    assert_same_hits(got, want, queries, corpus, cosine=False)


@pytest.mark.parity
def test_semantic_search_on_real_vectors_with_ties_and_a_memmap(st, torch, model, vectors, tmp_path):
    """MiniLM vectors, the corpus three times over (every score tied three ways, to the last bit or nearly: BLAS
    rounds a row by its place in the chunk), read from a memory-mapped .npy as from memory."""
    queries = model.embed(QUERIES, progress=False)
    corpus = np.concatenate([vectors] * 3)
    np.save(tmp_path / "index.npy", corpus)
    index = np.load(tmp_path / "index.npy", mmap_mode="r")
    for top_k in (1, 4, 9, 100):
        want = st.util.semantic_search(torch.from_numpy(queries), torch.from_numpy(corpus), top_k=top_k)
        got = numbert.semantic_search(queries, index, top_k=top_k, corpus_chunk_size=20)
        assert_same_hits(got, want, queries, corpus)
        assert got == numbert.semantic_search(queries, corpus, top_k=top_k, corpus_chunk_size=20)  # read in chunks
    assert len(got[0]) == len(corpus)  # top_k above the corpus: every row


def test_semantic_search_ties_go_to_the_lower_corpus_id_in_every_chunking():
    corpus = np.array([[0, 1], [1, 0], [0, 1], [1, 0], [1, 0], [0, 1]], np.float32)
    queries = np.array([[1, 0], [0, 2]], np.float32)
    want = [[1, 3, 4, 0], [0, 2, 5, 1]]
    for chunk in (1, 2, 4, 100):
        got = numbert.semantic_search(queries, corpus, top_k=4, corpus_chunk_size=chunk, query_chunk_size=1)
        assert [[h["corpus_id"] for h in hits] for hits in got] == want
    assert numbert.semantic_search(queries[0], corpus, top_k=2) == [
        [{"corpus_id": 1, "score": 1.0}, {"corpus_id": 3, "score": 1.0}]
    ]


def test_semantic_search_bad_input_names_the_argument():
    corpus = np.zeros((5, 4), np.float32)
    for queries, options, message in [
        (np.zeros((2, 3), np.float32), {}, "query_vectors have width 3 but corpus_vectors 4"),
        (np.zeros((2, 4), np.float64), {}, "query_vectors are float64 but corpus_vectors float32"),
        (np.zeros((2, 4), np.float32), {"top_k": 0}, "top_k must be an integer >= 1"),
        (np.zeros((2, 4), np.float32), {"corpus_chunk_size": 0}, "corpus_chunk_size must be"),
        (np.zeros((2, 2, 4), np.float32), {}, "query_vectors must be"),
    ]:
        with pytest.raises(ValueError, match=message):
            numbert.semantic_search(queries, corpus, **options)
    with pytest.raises(ValueError, match="scores float vectors, got int8"):
        numbert.semantic_search(np.zeros((1, 4), np.int8), np.zeros((5, 4), np.int8))


@pytest.mark.parametrize("name, score_function", [("cos", None), ("dot", dot_score)])
def test_semantic_search_matches_the_committed_util_semantic_search_hits(name, score_function):
    """Without torch: util.semantic_search's hits in tests/fixtures (two equal corpus rows among them)."""
    expected = np.load(EXPECTED)
    options = {} if score_function is None else {"score_function": score_function}
    hits = numbert.semantic_search(expected["queries"], expected["corpus"], top_k=5, **options)
    assert [[hit["corpus_id"] for hit in query] for query in hits] == expected[f"{name}_ids"].tolist()
    scores = [[hit["score"] for hit in query] for query in hits]
    np.testing.assert_allclose(scores, expected[f"{name}_scores"], atol=1e-6 if name == "cos" else 1e-5, rtol=0)


# --- the command line --------------------------------------------------------------------------------


@pytest.fixture
def corpus_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


def cli(capsys, minilm_dir, *args) -> tuple[int, str, str]:
    status = main([*map(str, args), "--model", str(minilm_dir)])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("precision", ["int8", "ubinary"])
def test_cli_encode_precision_quantizes_the_whole_file(capsys, monkeypatch, minilm_dir, corpus_file, precision):
    """Embedded 4 lines at a time, yet int8 is scaled by the whole file's ranges: the file's float32 vectors
    quantized at once."""
    monkeypatch.setitem(numbert.cli.encode.CHUNK_LINES, "npy", 4)
    floats, out = corpus_file.parent / "floats.npy", corpus_file.parent / "vectors.npy"
    for path, options in ((floats, ["--normalize"]), (out, ["--precision", precision])):
        assert (
            cli(capsys, minilm_dir, "encode", "--file", corpus_file, "-o", path, "--dimensions", 96, *options)[0] == 0
        )
    got, want = np.load(out), quantize(np.load(floats), precision)
    assert got.dtype == want.dtype and got.shape == (len(TEXTS), 96 if precision == "int8" else 12)
    np.testing.assert_array_equal(got, want)


def test_cli_search_prints_the_hits(capsys, minilm_dir, model, corpus_file):
    index = corpus_file.parent / "vectors.npy"
    assert cli(capsys, minilm_dir, "encode", "--file", corpus_file, "-o", index, "--dimensions", 128)[0] == 0
    status, out, _ = cli(
        capsys,
        minilm_dir,
        "search",
        "bread",
        "--index",
        index,
        "--texts",
        corpus_file,
        "--top-k",
        3,
        "--json",
        "--dimensions",
        128,
    )
    assert status == 0
    want = numbert.semantic_search(model.embed("bread", dimensions=128, progress=False), np.load(index), top_k=3)[0]
    assert json.loads(out) == [{**hit, "text": TEXTS[hit["corpus_id"]]} for hit in want]
    status, out, _ = cli(
        capsys,
        minilm_dir,
        "search",
        "bread",
        "--index",
        index,
        "--texts",
        corpus_file,
        "--top-k",
        2,
        "--dimensions",
        128,
    )
    assert out.splitlines() == [f"{h['score']:.4f}\t{h['corpus_id']}\t{TEXTS[h['corpus_id']]}" for h in want[:2]]


def test_cli_bad_input_is_one_line(capsys, minilm_dir, corpus_file, tmp_path):
    index = tmp_path / "vectors.npy"
    np.save(index, np.zeros((len(TEXTS), 384), np.float32))
    np.save(tmp_path / "int8.npy", np.zeros((len(TEXTS), 384), np.int8))
    (tmp_path / "short.txt").write_text("one\ntwo\n")
    for args, message in [
        (
            ["search", "q", "--index", index, "--texts", corpus_file, "--dimensions", 64],
            "holds vectors of width 384 but",
        ),
        (["search", "q", "--index", tmp_path / "int8.npy", "--texts", corpus_file], "holds int8 of shape"),
        (["search", "q", "--index", index, "--texts", tmp_path / "short.txt"], "has 2 lines but the index 16 vectors"),
        (["encode", "a", "b", "--format", "jsonl", "--precision", "int8"], "not --format jsonl"),
        (["encode", "a", "-o", tmp_path / "one.npy", "--precision", "int8"], "one line is not enough"),
    ]:
        status, _, err = cli(capsys, minilm_dir, *args)
        assert status == 1 and message in err, err


# --- hostile indexes: rows that are not numbers, headers that lie, files changed while read ---------------------


def nan_corpus() -> tuple[np.ndarray, np.ndarray]:
    """20 random rows, 3 of them NaN, one with an infinite value, one that overflows a dot product; and a query."""
    rng = np.random.default_rng(0)
    corpus = rng.normal(size=(20, 8)).astype(np.float32)
    corpus[[2, 7, 11]] = np.nan
    corpus[13, 3] = np.inf
    corpus[17] = 3e38  # finite, but its dot product with the queries (all > 0) passes float32's range
    return np.abs(rng.normal(size=(2, 8))).astype(np.float32), corpus


@pytest.mark.parametrize("name, score_function", [("cos", None), ("dot", dot_score)])
def test_rows_that_are_not_numbers_never_displace_a_finite_hit(name, score_function):
    """np.partition ranks NaN above every number: each NaN row took a top-k slot, the chunk's k-th score was NaN
    and nothing passed `>= NaN` (3 NaN rows in 20: no hit at all). Rows whose score is not finite are skipped,
    in every chunking, and the hits are those of the finite rows alone."""
    queries, corpus = nan_corpus()
    options = {} if score_function is None else {"score_function": score_function}
    keep = np.isfinite(corpus).all(axis=1)
    if name == "dot":
        with np.errstate(over="ignore", invalid="ignore"):
            keep &= np.isfinite(queries @ corpus.T).all(axis=0)
    finite = np.flatnonzero(keep).tolist()
    assert len(finite) == 20 - 4 - (name == "dot")
    with bounded(seconds=10, memory=5e6):
        want = numbert.semantic_search(queries, corpus[finite], top_k=5, **options)
        want = [[{**h, "corpus_id": finite[h["corpus_id"]]} for h in hits] for hits in want]
        for chunk in (1, 2, 3, 7, 19, 20, 500_000):
            for top_k in (3, 5):
                got = numbert.semantic_search(queries, corpus, top_k=top_k, corpus_chunk_size=chunk, **options)
                assert [[h["corpus_id"] for h in hits] for hits in got] == [
                    [h["corpus_id"] for h in hits[:top_k]] for hits in want
                ], (chunk, top_k)
                assert all(np.isfinite(h["score"]) for hits in got for h in hits)
        everything = numbert.semantic_search(queries, corpus, top_k=100, corpus_chunk_size=3, **options)
        assert [len(hits) for hits in everything] == [len(finite)] * 2  # fewer than top_k: no row that is not a number


def test_cli_search_prints_the_hits_of_an_index_with_nan_rows(tmp_path, minilm_dir):
    """The issue's index: 20 rows, 3 of them NaN; `numbert search --top-k 3` printed nothing and exited 0."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(20, 384)).astype(np.float32)
    vectors[[2, 7, 11]] = np.nan
    np.save(tmp_path / "index.npy", vectors)
    (tmp_path / "corpus.txt").write_text("".join(f"line {i}\n" for i in range(20)), encoding="utf-8")
    args = ["search", "line", "--index", tmp_path / "index.npy", "--texts", tmp_path / "corpus.txt", "--top-k", 3]
    done = run_limited(*args, model=minilm_dir, seconds=60)
    assert done.returncode == 0, done.stderr.decode()
    hits = [line.split("\t") for line in done.stdout.decode().splitlines()]
    assert len(hits) == 3 and not {"2", "7", "11"} & {i for _, i, _ in hits}


def write_npy(path: Path, shape: str, data: bytes, descr: str = "<f4") -> Path:
    """A version 1.0 .npy whose header says `shape` (as written, so it may lie), followed by `data`."""
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".ljust(117) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1") + data)
    return path


def test_a_damaged_index_is_one_line_naming_the_file(tmp_path, minilm_dir, corpus_file):
    """A negative dimension in the header was an OverflowError's traceback; a header promising more rows than the
    file holds is refused at open by the file's size; a header numpy cannot read is one line too."""
    rows = np.zeros((len(TEXTS), 384), np.float32).tobytes()
    cases = [
        (write_npy(tmp_path / "negative.npy", "(-3, 384)", rows), "a negative size"),
        (write_npy(tmp_path / "truncated.npy", "(1000, 384)", rows), "bytes: the file is truncated"),
        (write_npy(tmp_path / "longer.npy", "(2, 384)", rows), "the file is longer than its header says"),
        (write_npy(tmp_path / "garbled.npy", "(16, 384", rows), "is not a .npy file numbert reads"),
        (tmp_path / "text.npy", "is not a .npy file numbert reads"),
    ]
    (tmp_path / "text.npy").write_text("not an array")
    np.save(tmp_path / "fortran.npy", np.asfortranarray(np.zeros((len(TEXTS), 384), np.float32)))
    cases.append((tmp_path / "fortran.npy", "column by column (fortran_order)"))
    for index, words in cases:
        done = run_limited("search", "q", "--index", index, "--texts", corpus_file, model=minilm_dir, seconds=60)
        line = one_error_line(done)
        assert line.startswith(f"numbert search: error: {index}") and words in line, line


def test_a_big_endian_index_is_searched_as_numpy_reads_it(tmp_path, minilm_dir, corpus_file, model):
    """A '>f4' .npy (written on a big-endian machine, or by a Rust crate so told) holds the same float32 vectors."""
    vectors = model.embed(TEXTS, progress=False)
    np.save(tmp_path / "little.npy", vectors)
    np.save(tmp_path / "big.npy", vectors.astype(">f4"))
    answers = []
    for name in ("little", "big"):
        args = ["search", "bread", "--index", tmp_path / f"{name}.npy", "--texts", corpus_file, "--json"]
        done = run_limited(*args, model=minilm_dir, seconds=60)
        assert done.returncode == 0, done.stderr.decode()
        answers.append(json.loads(done.stdout))
    assert answers[0] == answers[1] and len(answers[0]) == 10
    query = model.embed(["bread"], progress=False)
    assert numbert.semantic_search(query, vectors.astype(">f4"), top_k=3) == numbert.semantic_search(
        query, vectors, top_k=3
    )


def test_an_index_changed_while_it_is_read_is_an_error_not_sigbus(tmp_path):
    """Memory-mapped, an index truncated during a search killed the process with SIGBUS, and one rewritten in
    place mixed old and new rows silently. Read with pread, a truncated file is a ValueError naming it, and a
    file written to since it was opened is told apart (the docs say: replace an index by rename)."""
    path = tmp_path / "index.npy"
    vectors = np.arange(40 * 8, dtype=np.float32).reshape(40, 8)
    np.save(path, vectors)
    with bounded(seconds=10, memory=2e6), NpyIndex(path) as index:
        assert index.shape == (40, 8) and len(index) == 40
        np.testing.assert_array_equal(index[5:9], vectors[5:9])
        index.check_unchanged()
        os.truncate(path, path.stat().st_size - 4 * 8 * 10)  # the last 10 rows gone
        np.testing.assert_array_equal(index[0:30], vectors[:30])
        with pytest.raises(ValueError, match="was truncated since it was opened; replace an index by renaming"):
            index[25:40]
        with pytest.raises(ValueError, match="was written to while it was read"):
            index.check_unchanged()
    np.save(path, vectors)
    with NpyIndex(path) as index:
        with open(path, "r+b") as f:  # rewritten in place: the same size
            f.seek(200)
            f.write(b"\x00" * 8)
        os.utime(path, ns=(index.stat.st_atime_ns, index.stat.st_mtime_ns + 1_000_000_000))
        with pytest.raises(ValueError, match="rows may mix two versions"):
            index.check_unchanged()
