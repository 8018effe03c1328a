"""Late interaction (ColBERT): numbert's token vectors and MaxSim scores equal PyLate's ColBERT.encode (committed
fixtures: PyLate pins older torch and transformers, so scripts/make_multi_vector_fixtures.py writes them in a venv of
its own) and sentence-transformers' MultiVectorEncoder (live), on a PyLate-saved checkpoint and on checkpoints
MultiVectorEncoder saves here; query and document modes, markers, [MASK] expansion, the skiplist, the lengths."""

from __future__ import annotations

import json
import shutil
import string
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import numbert
from numbert.model.config import BertConfig

FIXTURES = Path(__file__).parent / "fixtures"
PYLATE_DIR = FIXTURES / "colbert_pylate"  # a tiny random BERT as PyLate's ColBERT.save writes it
PYLATE_EXPECTED = FIXTURES / "colbert_pylate_expected.npz"
TINY = BertConfig(
    vocab_size=1,  # the vocabulary's size, set where it is made
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
)
QUERIES = ["What is the capital of France?", "who plays the violin", "a man eats bread, then food; fast"]
DOCUMENTS = [
    "Paris is the capital of France.",
    "A woman is playing the violin!",
    "The man is eating a piece of bread.",
    "x",
    "The girl, who is carrying a baby, smiles: (again) and again & again. " * 3,  # past the document length
]
WORDS = sorted({w.strip(string.punctuation).lower() for t in QUERIES + DOCUMENTS for w in t.split()} - {""})
VOCABULARY = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.punctuation, *WORDS]
VOCABULARY += [c for c in string.ascii_lowercase if c not in VOCABULARY] + [f"##{c}" for c in string.ascii_lowercase]
# PyLate's settings as its config_sentence_transformers.json saves them, each variant checked against PyLate
VARIANTS = {
    "expanded": {},  # the saved defaults below: [MASK] expansion, not attended, punctuation skipped
    "attended": {"attend_to_expansion_tokens": True, "skiplist_words": [",", "."]},
    "unexpanded": {"do_query_expansion": False, "query_prefix": "[unused0]", "document_prefix": ""},
}
PYLATE_SETTINGS = {"query_length": 12, "document_length": 20, "embedding_size": 16}


def variant_directory(root: Path, variant: str) -> Path:
    """The committed PyLate checkpoint, the variant's settings written into config_sentence_transformers.json."""
    directory = root / f"colbert-{variant}"
    shutil.copytree(PYLATE_DIR, directory)
    settings_file = directory / "config_sentence_transformers.json"
    settings = json.loads(settings_file.read_text()) | VARIANTS[variant]
    settings_file.write_text(json.dumps(settings, indent=2))
    return directory


def pylate_outputs(torch, colbert_class, directory: Path) -> dict[str, np.ndarray]:
    """PyLate's ColBERT.encode of QUERIES (is_query=True) and DOCUMENTS, its MaxSim scores (colbert_scores of the
    padded vectors with their masks: without masks it would offer the padding's zero vectors to the max) and the
    documents of each query best first, by array name."""
    from pylate import scores

    model = colbert_class(str(directory), device="cpu")
    q = model.encode(QUERIES, is_query=True, convert_to_numpy=True)
    d = model.encode(DOCUMENTS, is_query=False, convert_to_numpy=True)
    found = {f"query{i}": v for i, v in enumerate(q)} | {f"document{i}": v for i, v in enumerate(d)}

    def padded(vectors):
        tensors = [torch.from_numpy(np.asarray(v)) for v in vectors]
        mask = [torch.ones(len(t)) for t in tensors]
        pad = torch.nn.utils.rnn.pad_sequence
        return pad(tensors, batch_first=True), pad(mask, batch_first=True)

    (qs, q_mask), (ds, d_mask) = padded(q), padded(d)
    found["scores"] = scores.colbert_scores(qs, ds, queries_mask=q_mask, documents_mask=d_mask).numpy()
    found["ranking"] = torch.sort(torch.from_numpy(found["scores"]), descending=True, stable=True).indices.numpy()
    return found


@pytest.fixture(scope="module")
def expected() -> dict[str, dict[str, np.ndarray]]:
    with np.load(PYLATE_EXPECTED) as arrays:
        found: dict[str, dict[str, np.ndarray]] = {variant: {} for variant in VARIANTS}
        for key in arrays.files:
            variant, name = key.split("/")
            found[variant][name] = arrays[key]
    return found


@pytest.fixture(scope="module")
def variants(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pylate")
    return {variant: variant_directory(root, variant) for variant in VARIANTS}


@pytest.fixture(scope="module")
def mve(torch):
    st = pytest.importorskip("sentence_transformers")
    return st.MultiVectorEncoder


def assert_vectors_equal(ours: list[np.ndarray], theirs: list[np.ndarray], atol: float = 1e-5) -> None:
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.dtype == np.float32 and a.shape == np.shape(b), (i, a.shape, np.shape(b))
        np.testing.assert_allclose(a, b, atol=atol, rtol=0, err_msg=f"text {i}")


# --- PyLate (committed fixtures) -----------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_token_vectors_and_scores_equal_pylates(variants, expected, variant):
    model = numbert.load(variants[variant])
    want = expected[variant]
    queries = model.embed_multi(QUERIES, is_query=True)
    documents = model.embed_multi(DOCUMENTS, is_query=False)
    assert_vectors_equal(queries, [want[f"query{i}"] for i in range(len(QUERIES))])
    assert_vectors_equal(documents, [want[f"document{i}"] for i in range(len(DOCUMENTS))])
    scores = numbert.maxsim(queries, documents)
    np.testing.assert_allclose(scores, want["scores"], atol=1e-5, rtol=0)
    for q, query in enumerate(QUERIES):
        ranked = [hit["corpus_id"] for hit in model.rank_multi(query, DOCUMENTS)]
        assert ranked == want["ranking"][q].tolist()


def test_the_recipe_pylate_saved(variants):
    """What the committed checkpoint says, as numbert reads it: markers, lengths, expansion, skiplist."""
    model = numbert.load(variants["expanded"])
    c = model.colbert
    assert c.library == "PyLate" and c.query_marker == "[Q] " and c.document_marker == "[D] "
    assert (c.query_length, c.document_length, c.dim) == (12, 20, 16)
    assert c.expansion is not None and (c.expansion.length, c.expansion.attend) == (12, False)
    assert c.skiplist == tuple(string.punctuation) and c.skiplist_tasks == ("document",)
    (query,) = model.multi_rows(["What is the capital of France?"], is_query=True)
    tokenizer = model.tokenizer
    tokens = tokenizer.convert_ids_to_tokens(query.ids.tolist())
    assert tokens[:3] == ["[CLS]", "[Q] ", "what"] and tokens[-1] == "[MASK]" and len(tokens) == 12
    assert query.attended == tokens.index("[SEP]") + 1  # the [MASK]s read the query; nothing reads them
    assert model.embed("a text").shape == (32,)  # the sentence recipe of a plain BERT: the encoder still embeds


# --- sentence-transformers' MultiVectorEncoder (live) -----------------------------------------------------------


def assert_equal_to_mve(mve, directory: Path) -> None:
    """numbert's vectors and MaxSim scores of directory are MultiVectorEncoder's."""
    theirs = mve(str(directory), device="cpu")
    ours = numbert.load(directory)
    q_theirs = theirs.encode_query(QUERIES, convert_to_numpy=True)
    d_theirs = theirs.encode_document(DOCUMENTS, convert_to_numpy=True)
    q_ours, d_ours = ours.embed_multi(QUERIES, is_query=True), ours.embed_multi(DOCUMENTS)
    assert_vectors_equal(q_ours, q_theirs)
    assert_vectors_equal(d_ours, d_theirs)
    want = theirs.similarity(q_theirs, d_theirs).numpy()
    normalized = theirs.similarity_fn_name == "meanmaxsim"
    np.testing.assert_allclose(numbert.maxsim(q_ours, d_ours, length_normalize=normalized), want, atol=1e-5, rtol=0)
    ranked = [hit["corpus_id"] for hit in ours.rank_multi(QUERIES[0], DOCUMENTS)]
    assert ranked == np.argsort(-want[0], kind="stable").tolist()


@pytest.mark.parity
@pytest.mark.parametrize("variant", VARIANTS)
def test_pylate_checkpoints_equal_multivectorencoders(mve, variants, variant):
    assert_equal_to_mve(mve, variants[variant])


def tiny_bert(directory: Path) -> Path:
    """A tiny random BERT (write_random_bert, seed 3) with VOCABULARY: the encoder PyLate's checkpoint began as."""
    from numbert.testing import write_random_bert

    directory.mkdir(parents=True)
    (directory / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
    return write_random_bert(directory / "bert", directory / "vocab.txt", replace(TINY, vocab_size=len(VOCABULARY)), 3)


def native_mve(mve, torch, directory: Path, expansion: dict | None, **settings) -> Path:
    """A MultiVectorEncoder over a tiny BERT, saved by sentence-transformers as it saves its own: a Transformer with
    the lengths and expansion, a Dense on token_embeddings, a MultiVectorMask and a Normalize; prompts as markers."""
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.base.modules.dense import Dense
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask

    torch.manual_seed(0)
    bert = tiny_bert(directory.parent / "base")
    transformer = Transformer(str(bert), query_length=14, document_length=18, query_expansion=expansion)
    modules = [
        transformer,
        Dense(32, 24, bias=True, activation_function=torch.nn.Identity(), module_input_name="token_embeddings"),
        MultiVectorMask(skiplist_words=list(string.punctuation), skiplist_tasks=settings.pop("tasks", None)),
        Normalize(module_input_name="token_embeddings"),
    ]
    model = mve(modules=modules, device="cpu", **settings)
    model.save(str(directory))
    return directory


@pytest.mark.parity
@pytest.mark.parametrize(
    "case",
    [
        {"expansion": {"strategy": "fixed", "length": 10}, "prompts": {"query": "[Q] ", "document": "[D] "}},
        {"expansion": {"strategy": "min", "length": 8, "attend": True}, "tasks": ["query", "document"]},
        {
            "expansion": None,
            "prompts": {"query": "query: ", "document": "passage: "},
            "similarity_fn_name": "meanmaxsim",
        },
    ],
)
def test_checkpoints_multivectorencoder_saves_equal_its_vectors(mve, torch, tmp_path, case):
    directory = native_mve(mve, torch, tmp_path / "mve", **case)
    assert_equal_to_mve(mve, directory)


def modernbert_mve(mve, torch, transformers, directory: Path) -> Path:
    """A MultiVectorEncoder over a tiny random ModernBERT (GTE-ModernColBERT's backbone; ModernBERT's byte-level BPE,
    a window of +-4 tokens, shorter than the texts), saved by sentence-transformers: markers as prompts, [MASK]
    expansion, a Dense on token_embeddings, the punctuation skiplist, Normalize."""
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.base.modules.dense import Dense
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask
    from test_modern import MODELS, SHAPE
    from test_modern_text import transformers_tokenizer

    tokenizer = transformers_tokenizer(transformers, "modernbert_bpe")
    ids = {k: tokenizer.convert_tokens_to_ids(t) for k, t in (("cls_token_id", "[CLS]"), ("sep_token_id", "[SEP]"))}
    fields = dict(MODELS["modernbert"][1], vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    fields |= ids | {"bos_token_id": ids["cls_token_id"], "eos_token_id": ids["sep_token_id"]}
    torch.manual_seed(0)
    backbone = transformers.ModernBertModel(transformers.ModernBertConfig(**{**SHAPE, **fields})).eval()
    with torch.no_grad():
        for parameter in backbone.parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    backbone.save_pretrained(directory.parent / "modernbert")
    tokenizer.save_pretrained(directory.parent / "modernbert")
    expansion = {"strategy": "fixed", "length": 16}
    transformer = Transformer(
        str(directory.parent / "modernbert"), query_length=16, document_length=24, query_expansion=expansion
    )
    modules = [
        transformer,
        Dense(32, 24, bias=False, activation_function=torch.nn.Identity(), module_input_name="token_embeddings"),
        MultiVectorMask(skiplist_words=list(string.punctuation)),
        Normalize(module_input_name="token_embeddings"),
    ]
    mve(modules=modules, device="cpu", prompts={"query": "[Q] ", "document": "[D] "}).save(str(directory))
    return directory


@pytest.mark.parity
def test_a_modernbert_backbone_multivectorencoder_saves_equal_its_vectors(mve, torch, transformers, tmp_path):
    """The issue's second backbone: ModernBERT's rotary positions, pre-norm layers and sliding windows under the
    ColBERT readout, as MultiVectorEncoder computes them (queries, documents, MaxSim and the ranking)."""
    directory = modernbert_mve(mve, torch, transformers, tmp_path / "modern-colbert")
    assert numbert.load(directory).config.model_type == "modernbert"
    assert_equal_to_mve(mve, directory)


@pytest.mark.parity
def test_a_pylate_checkpoint_resaved_by_multivectorencoder(mve, variants, tmp_path):
    """MultiVectorEncoder reads the PyLate checkpoint and saves it in its own format ([Q] as a special token and a
    prompt, the expansion in sentence_bert_config.json): numbert reads that too, to the same vectors."""
    mve(str(variants["expanded"]), device="cpu").save(str(tmp_path / "resaved"))
    ours = numbert.load(tmp_path / "resaved")
    assert ours.colbert.library == "sentence-transformers" and ours.colbert.expansion.length == 12
    assert_equal_to_mve(mve, tmp_path / "resaved")
    before = numbert.load(variants["expanded"])
    assert_vectors_equal(ours.embed_multi(DOCUMENTS), before.embed_multi(DOCUMENTS), atol=1e-6)


# --- the expansion forward, MaxSim, refusals ------------------------------------------------------------------------


def test_expansion_tokens_run_as_transformers_runs_padding(variants):
    """A query's [MASK]s are positions the mask hides: the fast path computes them (every_position) as the
    reference's padded batch does, and the query's own tokens are as without them."""
    from numbert.model import reference

    model = numbert.load(variants["expanded"])
    rows = model.multi_rows(QUERIES, is_query=True)
    out = model.forward_rows(rows)
    ids, mask = out.input_ids, out.attention_mask
    hidden, _, _ = reference.forward(model.encoder, ids, np.zeros_like(ids), mask)
    np.testing.assert_allclose(out.hidden_states, hidden, atol=2e-5, rtol=0)
    for row, i in zip(rows, range(len(rows))):
        alone = model.forward(row.ids[: row.attended])
        np.testing.assert_allclose(out.last_hidden_state[i, : row.attended], alone.last_hidden_state, atol=2e-5)


def test_maxsim_of_arrays_and_lists():
    rng = np.random.default_rng(0)
    q, d = rng.standard_normal((3, 4), np.float32), rng.standard_normal((5, 4), np.float32)
    want = float((q @ d.T).max(axis=1).sum())
    assert numbert.maxsim(q, d) == pytest.approx(want, abs=1e-6)
    assert numbert.maxsim(q, d, length_normalize=True) == pytest.approx(want / 3, abs=1e-6)
    matrix = numbert.maxsim([q, q[:1]], [d, d[2:]])
    assert matrix.shape == (2, 2) and matrix.dtype == np.float32 and matrix[0, 0] == pytest.approx(want, abs=1e-6)
    assert numbert.maxsim([q], d).shape == (1, 1)
    with pytest.raises(ValueError, match="one width"):
        numbert.maxsim(q, d[:, :3])
    with pytest.raises(TypeError, match="query_vectors"):
        numbert.maxsim("text", d)


def test_a_model_without_a_multi_vector_recipe_is_refused(tmp_path, vocab_path):
    from numbert.testing import write_random_bert

    model = numbert.load(write_random_bert(tmp_path / "bert", vocab_path, replace(TINY, vocab_size=30522)))
    with pytest.raises(ValueError, match="is not a multi-vector model"):
        model.embed_multi(["a text"])
    with pytest.raises(ValueError, match="documents is empty"):
        numbert.load(PYLATE_DIR).rank_multi("query", [])
