"""BERT's relatives (RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA, MPNet) against transformers: the encoder's
hidden states, attentions and pooler, and every head's logits, on random-weight checkpoints transformers saves
here; then the committed fixtures (scripts/make_family_fixture.py) without torch; then loading's refusals."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from helpers import ServerProcess, bounded, serve_by_name, served_as_embed

import numbert
from numbert.model.heads import classifier_logits, masked_lm_logits
from numbert.pipeline.readouts import SequenceLogits

FIXTURES = Path(__file__).parent / "fixtures" / "family"
ATOL = 1e-5
VOCAB, POSITIONS, LABELS = 64, 24, 3
SHAPE = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
# model_type -> (transformers' class-name stem, its config's fields besides SHAPE)
RELATIVES = {
    "roberta": ("Roberta", dict(pad_token_id=1, type_vocab_size=1, max_position_embeddings=POSITIONS + 2)),
    "xlm-roberta": ("XLMRoberta", dict(pad_token_id=1, type_vocab_size=1, max_position_embeddings=POSITIONS + 2)),
    "distilbert": ("DistilBert", dict(max_position_embeddings=POSITIONS)),
    "electra": ("Electra", dict(embedding_size=16, max_position_embeddings=POSITIONS)),  # projected 16 -> 32
    "mpnet": ("MPNet", dict(pad_token_id=1, max_position_embeddings=POSITIONS + 2)),
}
DISTILBERT_NAMES = dict(hidden_size="dim", num_hidden_layers="n_layers", num_attention_heads="n_heads")
HEADS = ("ForMaskedLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering")
FIXTURE_HEADS = ("ForMaskedLM", "ForSequenceClassification")  # committed: the two heads that differ most
# a WordPiece vocabulary of VOCAB ids for the committed fixtures: BERT's special tokens, letters and word pieces
LETTERS = "abcdefghijklmnopqrstuvwxyz"
VOCABULARY = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    *LETTERS,
    *(f"##{c}" for c in LETTERS),
    ".",
    ",",
    "!",
    "?",
    "the",
    "cat",
    "sat",
]
assert len(VOCABULARY) == VOCAB


def transformers_config(transformers, model_type: str, task: str):
    stem, fields = RELATIVES[model_type]
    shape = dict(SHAPE, num_labels=2 if task == "ForQuestionAnswering" else LABELS)
    if model_type == "distilbert":
        shape = {DISTILBERT_NAMES.get(k, k): v for k, v in shape.items()}
        shape["hidden_dim"] = shape.pop("intermediate_size")
    return getattr(transformers, f"{stem}Config")(**shape, **fields)


def save_relative(transformers, torch, model_type: str, task: str, directory: Path):
    """A random-weight transformers model of `model_type` + `task` ("Model", "ForMaskedLM", ...), seed 0,
    saved into `directory`; returns the torch model (eager attention, so it returns its attentions)."""
    torch.manual_seed(0)
    stem = RELATIVES[model_type][0]
    model_class = getattr(transformers, stem + task)
    config = transformers_config(transformers, model_type, task)
    config._attn_implementation = "eager"
    model = model_class(config).eval()
    model.save_pretrained(directory)
    return model


def batch(model_type: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three rows of 9, 6 and 4 tokens, right-padded with the pad id; a second segment in the first row
    where the model has token types."""
    pad = RELATIVES[model_type][1].get("pad_token_id", 0)
    ids = np.random.default_rng(0).integers(3, VOCAB, (3, 9))
    ids[:, 0] = 0  # <s> / [CLS]
    mask = np.ones_like(ids)
    for row, length in ((1, 6), (2, 4)):
        ids[row, length:], mask[row, length:] = pad, 0
    types = np.zeros_like(ids)
    if model_type == "electra":
        types[0, 5:] = 1
    return ids, types, mask


def transformers_outputs(torch, model, model_type: str, task: str) -> dict[str, np.ndarray]:
    """What the torch model computes on `batch(model_type)`, by numbert's names."""
    ids, types, mask = batch(model_type)
    inputs = dict(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))
    if model_type in ("electra", "roberta", "xlm-roberta"):
        inputs["token_type_ids"] = torch.tensor(types)
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True, output_attentions=True)
    found = {
        "hidden_states": np.stack([h.numpy() for h in out.hidden_states]),
        "attentions": np.stack([a.numpy() for a in out.attentions]),
    }
    if task == "Model" and getattr(out, "pooler_output", None) is not None:
        found["pooler_output"] = out.pooler_output.numpy()
    if task == "ForQuestionAnswering":
        found["start_logits"], found["end_logits"] = out.start_logits.numpy(), out.end_logits.numpy()
    elif task != "Model":
        found["logits"] = out.logits.numpy()
    return found


def numbert_outputs(model: numbert.Bert, model_type: str, task: str) -> dict[str, np.ndarray]:
    """numbert's outputs on the same batch, by the same names."""
    out = model.forward(*batch(model_type), output_attentions=True)
    found = {"hidden_states": out.hidden_states, "attentions": out.attentions}
    if out.pooler_output is not None:
        found["pooler_output"] = out.pooler_output
    last = out.last_hidden_state
    if task == "ForMaskedLM":
        found["logits"] = masked_lm_logits(last, model.heads.masked_lm, model.config.layer_norm_eps)
    elif task == "ForSequenceClassification":
        found["logits"] = np.stack(SequenceLogits(model.heads.sequence_classifier)(out))
    elif task == "ForTokenClassification":
        found["logits"] = classifier_logits(last, model.heads.token_classifier)
    elif task == "ForQuestionAnswering":
        logits = classifier_logits(last, model.heads.question_answering)  # (..., seq, 2): start, end
        found["start_logits"], found["end_logits"] = logits[..., 0], logits[..., 1]
    return found


def assert_outputs_match(found: dict[str, np.ndarray], expected: dict[str, np.ndarray], mask: np.ndarray) -> None:
    """Equal on the real tokens; numbert leaves padded positions zero (transformers computes them too), so
    per-token outputs are compared where the mask is 1 (attentions by query row)."""
    assert sorted(found) == sorted(expected)
    real = mask.astype(bool)
    for name, value in expected.items():
        assert found[name].shape == value.shape and found[name].dtype == np.float32, name
        a, b = found[name], value
        if name == "hidden_states":
            a, b = a[:, real], b[:, real]
        elif name == "attentions":
            a, b = a.transpose(0, 1, 3, 2, 4)[:, real], b.transpose(0, 1, 3, 2, 4)[:, real]
        elif a.ndim >= 2 and a.shape[:2] == real.shape:
            a, b = a[real], b[real]
        np.testing.assert_allclose(a, b, atol=ATOL, rtol=0, err_msg=name)


@pytest.fixture(scope="module")
def relative(tmp_path_factory, transformers, torch):
    """A factory: relative(model_type, task) -> (numbert model, transformers' outputs), each made once."""
    made = {}

    def make(model_type: str, task: str):
        if (model_type, task) not in made:
            directory = tmp_path_factory.mktemp(f"{model_type}-{task}")
            reference = save_relative(transformers, torch, model_type, task, directory)
            expected = transformers_outputs(torch, reference, model_type, task)
            made[model_type, task] = numbert.load(directory), expected
        return made[model_type, task]

    return make


# ----------------------------------------------------------------------------------------------
# parity with transformers


@pytest.mark.parity
@pytest.mark.parametrize("model_type", RELATIVES)
def test_encoder_matches_transformers(relative, model_type):
    """All hidden states, attentions and the pooler (RoBERTa, XLM-R, MPNet) of a padded batch."""
    model, expected = relative(model_type, "Model")
    assert model.config.model_type == model_type
    assert ("pooler_output" in expected) == (model.encoder.pooler is not None)
    assert_outputs_match(numbert_outputs(model, model_type, "Model"), expected, batch(model_type)[2])


@pytest.mark.parity
@pytest.mark.parametrize("task", HEADS)
@pytest.mark.parametrize("model_type", ["roberta", "distilbert", "electra", "mpnet"])  # XLM-R's heads are RoBERTa's
def test_heads_match_transformers(relative, model_type, task):
    model, expected = relative(model_type, task)
    assert_outputs_match(numbert_outputs(model, model_type, task), expected, batch(model_type)[2])


# ----------------------------------------------------------------------------------------------
# the committed fixtures, without torch


@pytest.mark.parametrize("task", FIXTURE_HEADS)
@pytest.mark.parametrize("model_type", RELATIVES)
def test_committed_fixtures(model_type, task):
    directory = FIXTURES / f"{model_type}-{task}"
    with np.load(directory / "expected.npz") as expected:
        assert_outputs_match(
            numbert_outputs(numbert.load(directory), model_type, task), dict(expected), batch(model_type)[2]
        )


# ----------------------------------------------------------------------------------------------
# loading: the architecture from config.json, refusals naming what is wrong


def copy_fixture(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(FIXTURES / name, tmp_path / name))


def edit_config(directory: Path, **changes) -> None:
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))


def test_an_architecture_without_model_type_is_read_from_architectures(tmp_path):
    directory = copy_fixture(tmp_path, "mpnet-ForMaskedLM")
    edit_config(directory, model_type=None)
    assert numbert.load(directory).config.model_type == "mpnet"


def test_a_model_type_numbert_does_not_run_is_refused_naming_it_and_the_supported_ones(tmp_path):
    directory = copy_fixture(tmp_path, "roberta-ForMaskedLM")
    edit_config(directory, model_type="deberta-v2")
    with pytest.raises(ValueError, match="'deberta-v2'.*bert, roberta, xlm-roberta, distilbert, electra, mpnet"):
        numbert.load(directory)


@pytest.mark.parametrize(
    "name, changes, tensor",
    [  # BERT's name, and the relative's own where it differs
        (
            "distilbert-ForMaskedLM",
            {"hidden_dim": 40},
            "'encoder.layer.0.intermediate.dense.weight' ('distilbert.transformer.layer.0.ffn.lin1.weight' in the",
        ),
        ("electra-ForMaskedLM", {"embedding_size": 32}, "'embeddings.word_embeddings.weight' ('electra.embeddings"),
        ("mpnet-ForMaskedLM", {"relative_attention_num_buckets": 40}, "'encoder.relative_attention_bias.weight'"),
    ],
)
def test_a_config_disagreeing_with_the_checkpoint_names_the_tensor(tmp_path, name, changes, tensor):
    directory = copy_fixture(tmp_path, name)
    edit_config(directory, **changes)
    with pytest.raises(ValueError, match=f"tensor {re.escape(tensor)}.* has shape"):
        numbert.load(directory)


def test_an_mpnet_table_of_fewer_buckets_than_it_reads_is_refused_at_load(tmp_path):
    """Issue 35: config and table agreeing on 16 buckets loaded, then the forward raised IndexError (bucket 31 of
    a 16-row table; transformers fails so too). Refused at load, naming the field and the tensor."""
    from safetensors.numpy import load_file, save_file

    directory = copy_fixture(tmp_path, "mpnet-ForMaskedLM")
    edit_config(directory, relative_attention_num_buckets=16)
    (weights_file,) = directory.glob("*.safetensors")
    weights = load_file(weights_file)
    (name,) = [n for n in weights if n.endswith("relative_attention_bias.weight")]
    weights[name] = weights[name][:16]
    save_file(weights, weights_file)
    with (
        bounded(seconds=10, memory=50e6),
        pytest.raises(
            ValueError,
            match=r"relative_attention_num_buckets is 16, but mpnet reads 32 buckets .*encoder.relative_attent",
        ),
    ):
        numbert.load(directory)


def test_a_missing_head_names_the_relative_s_architecture():
    model = numbert.load(FIXTURES / "electra-ForSequenceClassification")
    with pytest.raises(ValueError, match="saved from ElectraForMaskedLM"):
        model.fill_mask("the [MASK] sat.")
    with pytest.raises(ValueError, match="saved from ElectraForQuestionAnswering"):
        model.qa("who sat?", "the cat sat.")
    assert model.classify("the cat sat.")[0].label in model.heads.labels  # the head it has answers


def test_a_model_without_token_types_ignores_them_and_counts_positions_past_padding():
    model = numbert.load(FIXTURES / "mpnet-ForMaskedLM")
    ids, _, mask = batch("mpnet")
    plain = model.forward(ids, None, mask).hidden_states
    np.testing.assert_array_equal(model.forward(ids, np.ones_like(ids), mask).hidden_states, plain)
    assert model.config.max_tokens == POSITIONS  # 26 positions, 2 of them up to the padding index
    with pytest.raises(ValueError, match=f"{POSITIONS} positions"):
        model.forward(np.full(POSITIONS + 1, 5))


# ----------------------------------------------------------------------------------------------
# end to end: text through each relative's own tokenizer, as sentence-transformers directories

TEXTS = [
    "A man is eating food.",
    "The girl is carrying a baby.",
    "hi",
    "Café, naïve and résumé!",
    "  spaced   out  東京 ",
    "a <pad> and a <mask> in the text",  # special tokens by name: ids equal to padding's, which RoBERTa's positions see
    "The quick brown fox jumps over the lazy dog. " * 6,  # longer than MAX_SEQ_LENGTH: cut there
]
MAX_SEQ_LENGTH = 12  # < POSITIONS: sentence-transformers 6 keeps it as the tokenizer's model_max_length
MPNET_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # all-mpnet-base-v2's vocab.txt: these, bert-base's, then <mask>


def relative_tokenizer(transformers, model_type: str, vocab_path: Path, directory: Path):
    """The transformers tokenizer a checkpoint of `model_type` ships: RoBERTa's byte-level BPE and XLM-R's
    SentencePiece Unigram from the committed tokenizer.json fixtures, MPNet's WordPiece as all-mpnet-base-v2's
    (bert-base's vocabulary between <s> <pad> </s> <unk> and <mask>), bert-base's WordPiece for the others."""
    from tokenizers import Tokenizer as RustTokenizer

    if model_type in ("roberta", "xlm-roberta"):
        name = {"roberta": "roberta_bpe.json", "xlm-roberta": "xlmr_spm.json"}[model_type]
        backend = RustTokenizer.from_file(str(FIXTURES.parent / name))
        stem = RELATIVES[model_type][0]
        return getattr(transformers, f"{stem}TokenizerFast")(tokenizer_object=backend)
    if model_type == "mpnet":
        vocab = directory / "mpnet-vocab.txt"
        vocab.write_text("\n".join([*MPNET_SPECIALS, *vocab_path.read_text().splitlines(), "<mask>"]) + "\n")
        return transformers.MPNetTokenizerFast(vocab=str(vocab))
    stem = "Bert" if model_type == "bert" else RELATIVES[model_type][0]
    return getattr(transformers, f"{stem}Tokenizer")(str(vocab_path))


@pytest.fixture(scope="module")
def text_relative(tmp_path_factory, vocab_path, transformers, torch):
    """A factory: text_relative(model_type) -> (encoder directory, sentence-transformers directory,
    SentenceTransformer, torch model), each made once: a random-weight model (BERT or a relative) whose
    vocabulary is its tokenizer's, with mean Pooling, Dense (32 -> 8, tanh) and Normalize, saved by
    sentence-transformers with max_seq_length MAX_SEQ_LENGTH."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st_modules

    made = {}

    def make(model_type: str):
        if model_type not in made:
            base = tmp_path_factory.mktemp(model_type)
            tokenizer = relative_tokenizer(transformers, model_type, vocab_path, base)
            if model_type == "bert":
                config = transformers.BertConfig(**SHAPE, max_position_embeddings=POSITIONS)
                model_class = transformers.BertModel
            else:
                config = transformers_config(transformers, model_type, "Model")
                model_class = getattr(transformers, RELATIVES[model_type][0] + "Model")
            config.vocab_size = len(tokenizer)
            torch.manual_seed(0)
            reference = model_class(config).eval()
            reference.save_pretrained(base / "encoder")
            tokenizer.save_pretrained(base / "encoder")
            word = st_modules.Transformer(str(base / "encoder"), max_seq_length=MAX_SEQ_LENGTH)
            dense = st_modules.Dense(32, 8, activation_function=torch.nn.Tanh())
            pooling = st_modules.Pooling(32, pooling_mode="mean")
            st = SentenceTransformer(modules=[word, pooling, dense, st_modules.Normalize()], device="cpu")
            st.save(str(base / model_type))  # served under its directory's name: the model type
            made[model_type] = base / "encoder", base / model_type, st, reference
        return made[model_type]

    return make


@pytest.mark.parity
@pytest.mark.parametrize("model_type", ["bert", *RELATIVES])
def test_sentence_transformers_directory_matches_encode(text_relative, model_type):
    """numbert.load reads the directory (tokenizer.json of the relative's kind, Pooling, Dense, Normalize, and
    max_seq_length where sentence-transformers 6 keeps it: tokenizer_config.json) and embeds as encode."""
    _, directory, st, _ = text_relative(model_type)
    assert "max_seq_length" not in json.loads((directory / "sentence_bert_config.json").read_text())
    model = numbert.load(directory)
    assert model.recipe().max_length == MAX_SEQ_LENGTH
    want = st.encode(TEXTS)
    got = model.embed(TEXTS, progress=False)
    assert got.shape == want.shape == (len(TEXTS), 8)
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)


@pytest.mark.parity
@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta", "mpnet"])
def test_embed_reads_text_as_transformers(text_relative, transformers, torch, model_type):
    """The plain checkpoint (no sentence-transformers modules): numbert's tokenizer gives the ids, pairs
    included, of the transformers tokenizer saved with it, and `embed` (mean of the last layer) is the mean of
    transformers' last hidden state over them, long texts cut at all the model's positions."""
    encoder_dir, _, _, reference = text_relative(model_type)
    model, theirs = numbert.load(encoder_dir), transformers.AutoTokenizer.from_pretrained(encoder_dir)
    assert model.config.max_tokens == POSITIONS
    for text, pair in [*((t, None) for t in TEXTS), ("A question?", "An answer, <s> and </s>.")]:
        assert model.tokenizer.encode(text, pair).ids == theirs(text, pair)["input_ids"], (text, pair)
    batch = theirs(TEXTS, padding=True, truncation=True, max_length=POSITIONS, return_tensors="pt")
    with torch.no_grad():
        hidden = reference(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    want = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    np.testing.assert_allclose(model.embed(TEXTS, layers=-1, progress=False), want, atol=ATOL, rtol=0)


# ----------------------------------------------------------------------------------------------
# the server


def test_a_distilbert_classifier_serves_embeddings_and_label_scores():
    """`numbert serve` on a relative with neither token types nor a pooler: /v1/embeddings (mean pooling) and
    /predict (DistilBERT's pre_classifier + ReLU + classifier) answer as the loaded model does."""
    directory = FIXTURES / "distilbert-ForSequenceClassification"
    model, texts = numbert.load(directory), ["a cat sat on the mat.", "hello, world!"]
    server = ServerProcess(directory)
    try:
        r = httpx.post(server.url + "/v1/embeddings", json={"input": texts, "model": server.model_name})
        assert r.status_code == 200, r.text
        got = np.array([item["embedding"] for item in r.json()["data"]], np.float32)
        np.testing.assert_allclose(got, model.embed(texts, progress=False), atol=1e-6, rtol=0)
        r = httpx.post(server.url + "/predict", json={"inputs": texts[0], "raw_scores": True})
        assert r.status_code == 200, r.text
        best = r.json()[0]
        assert best == {"label": model.classify(texts[0], function="none")[0].label, "score": best["score"]}
        assert abs(best["score"] - model.classify(texts[0], function="none")[0].score) <= 1e-6
    finally:
        assert server.stop() == 0, "".join(server.lines)


@pytest.fixture(scope="module")
def family_server(text_relative):
    """One `numbert serve` over the five sentence-transformers directories, each served under its model type."""
    directories = {model_type: text_relative(model_type)[1] for model_type in RELATIVES}
    server = serve_by_name(directories, "--auto-truncate")  # long texts cut as embed cuts them
    yield server, directories
    assert server.stop() == 0, "".join(server.lines)


@pytest.mark.parity
@pytest.mark.parametrize("model_type", RELATIVES)
def test_one_server_serves_each_relative_by_its_name(family_server, model_type):
    """/v1/embeddings picks the relative by the request's `model` and answers as its `embed`."""
    server, directories = family_server
    assert served_as_embed(server, model_type, directories[model_type], TEXTS)["model"] == model_type


@pytest.mark.parity
def test_workers_encode_a_relative_as_one_process(text_relative, tmp_path):
    """`numbert encode --workers 2` on XLM-R (SentencePiece Unigram, its precompiled charsmap, in each worker)
    writes the vectors one process writes, bit for bit (one BLAS thread everywhere, as in test_cli_parallel)."""
    directory = text_relative("xlm-roberta")[1]
    rng = np.random.default_rng(3)
    lines = [" ".join(rng.choice(TEXTS, int(rng.integers(1, 4)))) for _ in range(150)]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = dict(os.environ, HF_HUB_OFFLINE="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for name, options in (("one", ()), ("two", ("--workers", "2"))):
        command = [sys.executable, "-m", "numbert", "encode", "--file", tmp_path / "in.txt", "--model", directory]
        done = subprocess.run(
            [*map(str, command), "-o", str(tmp_path / f"{name}.npy"), *options],
            env=env,
            capture_output=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr.decode()
    one, two = np.load(tmp_path / "one.npy"), np.load(tmp_path / "two.npy")
    assert one.shape == (len(lines), 8) and np.array_equal(one, two)
