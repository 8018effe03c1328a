"""The modern family from text: each model's tokenizer pipeline (ModernBERT's byte-level BPE, NomicBERT's and GTE
v1.5's WordPiece; gte-multilingual's and jina's XLM-R Unigram is tests/test_tokenizer_family.py's xlmr_spm.json)
token for token the Rust library's; sentence-transformers directories over each model with their pooling, prompts,
Dense and Normalize equal to SentenceTransformer.encode; nomic-embed-text-v1.5's Matryoshka rule against its model
card's formula; jina's task chosen per call."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from helpers import fixture_tokenizers, rust_fixture_tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_modern import MODELS, SHAPE
from test_tokenizer_family import our_windows, rust_windows
from test_tokenizer_parity import CORPUS, generated_lines

import numbert
from numbert.tokenizer import Tokenizer

FIXTURES = Path(__file__).parent / "fixtures"
TOKENIZERS = ("modernbert_bpe", "nomic_wordpiece")
EXPECTED = FIXTURES / "modern_tokenizers_expected.json"
LINES = CORPUS + generated_lines(40, seed=4) + ["a [MASK] b", "x[MASK]y", "  [MASK]", "e\u0301 and é", "[CLS] [SEP]"]
FIELDS = ("ids", "type_ids", "offsets")  # committed, for every sixth case (the whole is checked live)


@pytest.fixture(scope="module")
def ours() -> dict[str, Tokenizer]:
    return fixture_tokenizers(TOKENIZERS)


@pytest.fixture(scope="module")
def rust() -> dict:
    return rust_fixture_tokenizers(TOKENIZERS)


def cases() -> list[dict]:
    """The corpus, and random pairs with truncation."""
    rng = random.Random(5)
    found = [{"text": line} for line in LINES]
    for _ in range(40):
        found.append(
            {
                "text": rng.choice(LINES),
                "pair": rng.choice(LINES),
                "max_length": rng.choice([12, 24]),
                "strategy": rng.choice(["longest_first", "only_first"]),
                "stride": rng.choice([0, 2]),
            }
        )
    return found


def write_expected() -> None:
    """What the Rust library gives on cases(), committed for runs without it (scripts/make_modern_tokenizers.py)."""
    import tokenizers

    expected = {}
    for name in TOKENIZERS:
        rust_tokenizer = tokenizers.Tokenizer.from_file(str(FIXTURES / f"{name}.json"))
        expected[name] = []
        for case in cases()[::6]:
            try:
                windows = rust_windows(rust_tokenizer, **case)
            except BaseException:  # noqa: B036 - Rust refuses with an exception or a panic
                windows = None
            expected[name].append(None if windows is None else [{k: w[k] for k in FIELDS} for w in windows])
    EXPECTED.write_text(json.dumps(expected, separators=(",", ":")) + "\n", encoding="utf-8")


@pytest.mark.parametrize("name", TOKENIZERS)
def test_tokenizers_equal_rust_on_the_corpus_pairs_and_truncation(ours, rust, name):
    for case in cases():
        try:
            expected = rust_windows(rust[name], **case)
        except BaseException:  # noqa: B036
            with pytest.raises(ValueError):
                our_windows(ours[name], **case)
            continue
        assert our_windows(ours[name], **case) == expected, case
    for line in LINES:
        ids = rust[name].encode(line).ids
        for skip in (True, False):
            assert ours[name].decode(ids, skip_special_tokens=skip) == rust[name].decode(ids, skip), line


@pytest.mark.parametrize("name", TOKENIZERS)
def test_tokenizers_equal_the_committed_expectations(ours, name):
    """Without the Rust library: the committed ids, type ids, offsets and word ids."""
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))[name]
    for case, want in zip(cases()[::6], expected, strict=True):
        if want is None:
            with pytest.raises(ValueError):
                our_windows(ours[name], **case)
            continue
        got = [
            {k: [list(o) for o in w[k]] if k == "offsets" else w[k] for k in FIELDS}
            for w in our_windows(ours[name], **case)
        ]
        assert got == want, case


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(max_size=40) | st.sampled_from(["[MASK]", " [MASK] x", "é\u0301", "\u3000日本"]).map(lambda t: t * 2)
)
def test_fuzzed_text(ours, rust, text):
    for name in TOKENIZERS:
        assert our_windows(ours[name], text) == rust_windows(rust[name], text), (name, text)


# ----------------------------------------------------------------------------------------------
# sentence-transformers directories over each model

TEXTS = [
    "A man is eating food.",
    "The girl is carrying a baby.",
    "hi",
    "Café, naïve and résumé!",
    "  spaced   out  東京 ",
    "a [MASK] in the text",
    "The quick brown fox jumps over the lazy dog. " * 6,  # longer than MAX_SEQ_LENGTH: cut there
]
MAX_SEQ_LENGTH = 24  # longer than ModernBERT's window (+-4)
NOMIC_PROMPTS = {"search_query": "search_query: ", "search_document": "search_document: "}
# model_type -> (tokenizer.json, pooling, Dense, Normalize): CLS for GTE (gte-base-en-v1.5), mean for the others;
# nomic-embed-text-v1.5's directory has no Normalize (its card normalizes after the Matryoshka cut)
DIRECTORIES = {
    "modernbert": ("modernbert_bpe", "mean", False, True),
    "nomic_bert": ("nomic_wordpiece", "mean", False, False),
    "gte": ("xlmr_spm", "cls", False, True),
    "jina_embeddings_v3": ("xlmr_spm", "mean", True, True),
}


def transformers_tokenizer(transformers, name: str):
    from tokenizers import Tokenizer as RustTokenizer

    backend = RustTokenizer.from_file(str(FIXTURES / f"{name}.json"))
    if name == "xlmr_spm":
        return transformers.XLMRobertaTokenizerFast(tokenizer_object=backend)
    names = dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]")
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, **names)


@pytest.fixture(scope="module")
def sentence_model(tmp_path_factory, transformers, torch):
    """A factory: sentence_model(model_type) -> (directory, SentenceTransformer), each made once: a random-weight
    model whose vocabulary is its tokenizer's, saved by sentence-transformers with its modules (DIRECTORIES)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st_modules

    made = {}

    def make(model_type: str):
        if model_type not in made:
            base = tmp_path_factory.mktemp(model_type)
            name, pooling, dense, normalize = DIRECTORIES[model_type]
            tokenizer = transformers_tokenizer(transformers, name)
            stem, fields = MODELS[model_type]
            fields = dict(fields, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
            if model_type == "modernbert":
                ids = {
                    k: tokenizer.convert_tokens_to_ids(t)
                    for k, t in (("cls_token_id", "[CLS]"), ("sep_token_id", "[SEP]"))
                }
                fields |= ids | {"bos_token_id": ids["cls_token_id"], "eos_token_id": ids["sep_token_id"]}
            config = getattr(transformers, f"{stem}Config")(**{**SHAPE, **fields})
            torch.manual_seed(0)
            reference_model = getattr(transformers, f"{stem}Model")(config).eval()
            with torch.no_grad():
                for parameter in reference_model.parameters():
                    if parameter.dim() == 1:
                        parameter.add_(torch.randn_like(parameter) * 0.1)
            reference_model.save_pretrained(base / "encoder")
            tokenizer.save_pretrained(base / "encoder")
            word = st_modules.Transformer(str(base / "encoder"), max_seq_length=MAX_SEQ_LENGTH)
            modules = [word, st_modules.Pooling(32, pooling_mode=pooling)]
            if dense:
                modules.append(st_modules.Dense(32, 8, activation_function=torch.nn.Tanh()))
            if normalize:
                modules.append(st_modules.Normalize())
            prompts = NOMIC_PROMPTS if model_type == "nomic_bert" else None
            st_model = SentenceTransformer(modules=modules, device="cpu", prompts=prompts)
            st_model.save(str(base / model_type))
            made[model_type] = base / model_type, st_model
        return made[model_type]

    return make


@pytest.mark.parity
@pytest.mark.parametrize("model_type", MODELS)
def test_sentence_transformers_directories_equal_encode(sentence_model, model_type):
    directory, st_model = sentence_model(model_type)
    model = numbert.load(directory)
    assert model.config.model_type == model_type and model.recipe().max_length == MAX_SEQ_LENGTH
    want = st_model.encode(TEXTS)
    np.testing.assert_allclose(model.embed(TEXTS, progress=False), want, atol=1e-5, rtol=0)
    if model_type == "nomic_bert":
        for name in NOMIC_PROMPTS:
            want = st_model.encode(TEXTS, prompt_name=name)
            np.testing.assert_allclose(model.embed(TEXTS, prompt_name=name, progress=False), want, atol=1e-5, rtol=0)


@pytest.mark.parity
def test_nomic_s_matryoshka_rule_is_its_model_card_s(sentence_model, torch):
    """dimensions on a NomicBERT: a LayerNorm without weights over the full vector, the cut, then L2 (the card:
    F.layer_norm(embeddings, (dim,)), [:, :matryoshka_dim], F.normalize), not the plain cut."""
    directory, st_model = sentence_model("nomic_bert")
    model = numbert.load(directory)
    full = st_model.encode(TEXTS, prompt_name="search_document", convert_to_tensor=True)
    want = torch.nn.functional.layer_norm(full, normalized_shape=(full.shape[1],))[:, :16]
    want = torch.nn.functional.normalize(want, p=2, dim=1).numpy()
    got = model.embed(TEXTS, prompt_name="search_document", dimensions=16, progress=False)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    plain = full.numpy()[:, :16] / np.linalg.norm(full.numpy()[:, :16], axis=1, keepdims=True)
    assert np.abs(got - plain).max() > 1e-3  # the rule is not the plain cut


# ----------------------------------------------------------------------------------------------
# jina's task per call, the command line, the server, workers and shards


@pytest.fixture(scope="module")
def jina_with_tasks(tmp_path_factory, transformers, torch) -> Path:
    """The hub's jina-embeddings-v3 layout (task adapters, task instructions) with XLM-R's tokenizer."""
    from test_modern import jina_hub_checkpoint

    directory = tmp_path_factory.mktemp("jina-tasks")
    tokenizer = transformers_tokenizer(transformers, "xlmr_spm")
    jina_hub_checkpoint(transformers, torch, directory, vocab_size=len(tokenizer))
    tokenizer.save_pretrained(directory)
    return directory


def test_a_task_chooses_its_adapters_and_instruction_per_call(jina_with_tasks):
    model = numbert.load(jina_with_tasks)
    base = model.embed(TEXTS, progress=False)
    query = model.embed(TEXTS, task="retrieval.query", progress=False)
    by_hand = model.recipe(task="retrieval.query", prompt="Do retrieval.query: ")
    np.testing.assert_array_equal(model.embed(TEXTS, recipe=by_hand, progress=False), query)
    no_instruction = model.embed(TEXTS, task="retrieval.query", prompt="", progress=False)
    assert np.abs(query - no_instruction).max() > 1e-3 and np.abs(no_instruction - base).max() > 1e-3
    with pytest.raises(ValueError, match="unknown task 'query'; this model's tasks are retrieval.query"):
        model.embed(TEXTS, task="query")


def encode_lines(tmp_path: Path, directory: Path, name: str, *options) -> np.ndarray:
    import os
    import subprocess
    import sys

    (tmp_path / "in.txt").write_text("\n".join(TEXTS * 3) + "\n", encoding="utf-8")
    env = dict(os.environ, HF_HUB_OFFLINE="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = tmp_path / name  # "job/": a sharded job's directory, given with its trailing slash
    command = [
        sys.executable,
        "-m",
        "numbert",
        "encode",
        "--file",
        tmp_path / "in.txt",
        "--model",
        directory,
        "-o",
        f"{out}/" if name.endswith("/") else out,
    ]
    done = subprocess.run([*map(str, command), *options], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    if out.suffix == ".npy":
        return np.load(out)
    return np.concatenate([np.load(path) for path in sorted(out.rglob("*.npy"))])


@pytest.mark.parity
def test_numbert_encode_workers_and_shards_run_each_modern_model(tmp_path, sentence_model, jina_with_tasks):
    """`numbert encode` on each model's directory gives embed's vectors; jina with --task through worker processes
    and a sharded job gives the one-process vectors bit for bit (one BLAS thread everywhere)."""
    for model_type in MODELS:
        directory, _ = sentence_model(model_type)
        want = numbert.load(directory).embed(TEXTS * 3, progress=False)
        np.testing.assert_allclose(encode_lines(tmp_path, directory, f"{model_type}.npy"), want, atol=1e-6, rtol=0)
    task = ("--task", "retrieval.passage")
    one = encode_lines(tmp_path, jina_with_tasks, "one.npy", *task)
    np.testing.assert_allclose(
        one, numbert.load(jina_with_tasks).embed(TEXTS * 3, task="retrieval.passage", progress=False), atol=1e-6
    )
    assert np.array_equal(encode_lines(tmp_path, jina_with_tasks, "two.npy", *task, "--workers", "2"), one)
    assert np.array_equal(encode_lines(tmp_path, jina_with_tasks, "job/", *task, "--shard-lines", "8"), one)
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "numbert", "encode", "--model", str(jina_with_tasks), "--task", "nope", "a text"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "unknown task 'nope'" in done.stderr and "retrieval.query" in done.stderr


@pytest.fixture(scope="module")
def modern_server(sentence_model, jina_with_tasks):
    """One `numbert serve` over the four sentence-transformers directories, each by its model type, and the jina
    directory with task adapters as "jina-tasks"."""
    from helpers import serve_by_name

    directories = {model_type: sentence_model(model_type)[0] for model_type in MODELS}
    directories["jina-tasks"] = jina_with_tasks
    server = serve_by_name(directories, "--auto-truncate", timeout=120)
    yield server, directories
    assert server.stop() == 0, "".join(server.lines)


@pytest.mark.parity
@pytest.mark.parametrize("model_type", MODELS)
def test_one_server_serves_each_modern_model_by_its_name(modern_server, model_type):
    from helpers import served_as_embed

    server, directories = modern_server
    served_as_embed(server, model_type, directories[model_type], TEXTS)


def test_the_server_runs_a_request_s_task(modern_server):
    """jina's API names the task in the request ("task"): its adapters and instruction, as embed(task=...); an
    unknown task is a 422 naming it, and the server keeps serving."""
    import httpx

    server, directories = modern_server
    model = numbert.load(directories["jina-tasks"])
    for task in (None, "retrieval.query", "separation"):
        body = {"input": TEXTS, "model": "jina-tasks"} | ({} if task is None else {"task": task})
        r = httpx.post(server.url + "/v1/embeddings", json=body, timeout=60)
        assert r.status_code == 200, r.text
        got = np.array([item["embedding"] for item in r.json()["data"]], np.float32)
        np.testing.assert_allclose(got, model.embed(TEXTS, task=task, progress=False), atol=1e-6)
    r = httpx.post(server.url + "/v1/embeddings", json={"input": TEXTS, "model": "jina-tasks", "task": "x"}, timeout=60)
    assert r.status_code == 422 and "unknown task 'x'" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/embed", json={"inputs": "hi", "task": "retrieval.query"}, timeout=60)  # no adapters
    assert r.status_code == 422 and "has no task adapters" in r.json()["error"]["message"]
