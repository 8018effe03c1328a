"""Qwen3-Reranker through predict, rerank, the sentence-transformers door, the command line and the server, against
sentence-transformers 6.2's CrossEncoder over a causal LM (its Transformer with a chat template, LogitScore) and the
model card's formula (transformers' logits of "no" and "yes" at the last position): random-weight Qwen3ForCausalLM
checkpoints saved by transformers (lm_head tied to the word table, and not), the seq-cls conversion
(Qwen3ForSequenceClassification, score = the "yes" row minus the "no" row), a directory listing a LogitScore with
false_token_id null; a tiny byte-level BPE holding "yes" and "no", and a chat template rendering the card's prompt
from the query, document and system roles."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
from test_cli import one_error_line, run
from test_decoder_family import MODELS, SHAPE
from test_decoder_sentence import save_tokenizer

import numbert
from numbert.model.yes_no import reranker_prompt

ATOL = 1e-5
FIXTURES = Path(__file__).parent / "fixtures"
YES, NO = 55, 57  # the stand-in tokenizer's "yes" and "no" (its "X" and "Z" renamed)
TEMPLATE = (  # the card's prompt from chat messages, as Qwen3-Reranker's published templates render it
    '{%- set instruction = messages | selectattr("role", "eq", "system") | map(attribute="content") | first -%}\n'
    '{%- set query = messages | selectattr("role", "eq", "query") | map(attribute="content") | first -%}\n'
    '{%- set document = messages | selectattr("role", "eq", "document") | map(attribute="content") | first -%}\n'
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    'provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
    "<Instruct>: {{ instruction | default('Given a web search query, retrieve relevant passages that answer the "
    "query', true) }}\n<Query>: {{ query }}\n<Document>: {{ document }}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n\n"  # (Jinja drops a template's last newline)
)
QUERY = "what is the capital of china?"
DOCUMENTS = [
    "the capital of china is beijing.",
    "gravity is a force that attracts two bodies towards each other.",
    "",
    "beijing, the capital, has a long history; it is in the north of the country, and many people live there.",
]
PAIRS = [(QUERY, d) for d in DOCUMENTS] + [("explain gravity", DOCUMENTS[1])]
INSTRUCTION = "given a question, find the passage that answers it"


@pytest.fixture(scope="module")
def st(torch):
    return pytest.importorskip("sentence_transformers")


def save_reranker_tokenizer(directory: Path, template: bool = True) -> None:
    """The decoder fixtures' Qwen-style tokenizer with "yes" and "no" in its vocabulary, and the chat template."""
    save_tokenizer("qwen3", directory)
    spec = json.loads((directory / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    vocab["yes"], vocab["no"] = vocab.pop("X"), vocab.pop("Z")
    assert (vocab["yes"], vocab["no"]) == (YES, NO)
    (directory / "tokenizer.json").write_text(json.dumps(spec))
    if template:
        (directory / "chat_template.jinja").write_text(TEMPLATE)


def write_qwen3_reranker(directory: Path) -> Path:
    """A Qwen3-Reranker-like directory without torch: the committed Qwen3 fixture's weights under a Qwen3ForCausalLM
    config (its word table tied as the unembedding), the tokenizer with "yes" and "no", the chat template."""
    import shutil

    shutil.copytree(FIXTURES / "decoder" / "qwen3", directory, ignore=shutil.ignore_patterns("expected.npz"))
    config = json.loads((directory / "config.json").read_text())
    config |= {"architectures": ["Qwen3ForCausalLM"], "tie_word_embeddings": True, "max_position_embeddings": 1024}
    (directory / "config.json").write_text(json.dumps(config))
    save_reranker_tokenizer(directory)
    return directory


def scaled(torch, model):
    """Weights scaled up, so scores spread away from 1/2 and a wrong row or position shows."""
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
            else:
                parameter.mul_(6)
    return model.eval()


def causal_config(transformers, tied: bool, **changes):
    return transformers.Qwen3Config(**{**SHAPE, **MODELS["qwen3"][2], "tie_word_embeddings": tied, **changes})


@pytest.fixture(scope="module")
def reranker_dir(tmp_path_factory, transformers, torch):
    """A factory: reranker_dir(tied) -> (a Qwen3ForCausalLM directory transformers saved, the model)."""
    made = {}

    def make(tied: bool):
        if tied not in made:
            directory = tmp_path_factory.mktemp(f"qwen3-reranker-{'tied' if tied else 'untied'}")
            torch.manual_seed(1)
            model = scaled(
                torch, transformers.Qwen3ForCausalLM(causal_config(transformers, tied, max_position_embeddings=1024))
            )
            model.save_pretrained(directory)
            save_reranker_tokenizer(directory)
            made[tied] = directory, model
        return made[tied]

    return make


def card_scores(transformers, torch, model, directory: Path, pairs, instruction=None) -> np.ndarray:
    """The model card's: the card's prompt of each pair tokenized, logits[:, -1] of "no" and "yes", log_softmax, exp
    (one pair at a time: no padding to get wrong)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    scores = []
    for query, document in pairs:
        ids = tokenizer(reranker_prompt(query, document, instruction), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[:, -1, :]
        pair = torch.stack([logits[:, NO], logits[:, YES]], dim=1)
        scores.append(torch.nn.functional.log_softmax(pair, dim=1)[:, 1].exp().item())
    return np.array(scores, np.float32)


@pytest.mark.parametrize("tied", [True, False])
def test_the_door_predicts_and_ranks_as_cross_encoder(st, transformers, torch, reranker_dir, tied):
    from sentence_transformers import CrossEncoder as TheirCrossEncoder

    from numbert import CrossEncoder

    directory, model = reranker_dir(tied)
    theirs, ours = TheirCrossEncoder(str(directory)), CrossEncoder(str(directory))
    for prompt in (None, INSTRUCTION):
        want = theirs.predict(PAIRS, prompt=prompt)
        got = ours.predict(PAIRS, prompt=prompt)
        assert got.dtype == np.float32 and got.shape == (len(PAIRS),)
        assert np.ptp(want) > 0.1  # scores spread: a wrong row or position would show
        np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)
        card = card_scores(transformers, torch, model, directory, PAIRS, prompt)
        np.testing.assert_allclose(got, card, atol=ATOL, rtol=0)
        ranked, theirs_ranked = ours.rank(QUERY, DOCUMENTS, prompt=prompt), theirs.rank(QUERY, DOCUMENTS, prompt=prompt)
        assert [r["corpus_id"] for r in ranked] == [r["corpus_id"] for r in theirs_ranked]
        np.testing.assert_allclose([r["score"] for r in ranked], [r["score"] for r in theirs_ranked], atol=ATOL)
    one_at_a_time = [ours.predict([pair])[0] for pair in PAIRS]
    np.testing.assert_allclose(ours.predict(PAIRS, batch_size=3), one_at_a_time, atol=ATOL, rtol=0)
    np.testing.assert_allclose(ours.predict(PAIRS, prompt=""), ours.predict(PAIRS), atol=0, rtol=0)  # "": none


def test_only_two_rows_of_an_untied_lm_head_are_read(reranker_dir):
    directory, model = reranker_dir(False)
    ours = numbert.load(directory)
    assert "lm_head.weight" not in ours.encoder.weights
    head = model.lm_head.weight.detach().numpy()
    np.testing.assert_allclose(ours.encoder.weights["score.weight"][0], head[YES] - head[NO], atol=1e-6)
    assert ours.labels == ["LABEL_0"]


def test_a_bfloat16_lm_head_is_never_read_whole(torch, reranker_dir, tmp_path):
    """load_weights leaves lm_head.weight unread (a bfloat16 one would be widened whole, 621 MB for 0.6B's 151,669
    rows); its "yes" and "no" rows are read alone, widened exactly."""
    import copy

    from numbert.checkpoint.weights import Checkpoint, read_checkpoint

    _, model = reranker_dir(False)
    half = copy.deepcopy(model).to(torch.bfloat16)
    half.save_pretrained(tmp_path)
    _, raw = read_checkpoint(tmp_path, skip=("lm_head.weight",))
    assert "lm_head.weight" not in raw and "model.embed_tokens.weight" in raw
    rows = Checkpoint.find(tmp_path).rows("lm_head.weight", [YES, NO])
    assert rows is not None and rows.dtype == np.float32
    np.testing.assert_array_equal(rows, half.lm_head.weight.detach().float()[[YES, NO]].numpy())
    assert Checkpoint.find(tmp_path).rows("no.such.tensor", [0]) is None


def test_truncation_writes_the_template_s_tail_back_as_cross_encoder(st, reranker_dir):
    from sentence_transformers import CrossEncoder as TheirCrossEncoder

    directory, _ = reranker_dir(True)
    theirs, ours = TheirCrossEncoder(str(directory), max_length=400), numbert.load(directory)
    long_pairs = [(QUERY, DOCUMENTS[3] * 3), (QUERY, "short"), (QUERY, DOCUMENTS[1])]  # ~690, ~385, ~440 tokens
    want = theirs.predict(long_pairs)
    np.testing.assert_allclose(ours.predict(long_pairs, max_length=400), want, atol=ATOL, rtol=0)
    np.testing.assert_allclose(ours.predict(long_pairs, max_length=400, batch_size=1), want, atol=ATOL, rtol=0)
    assert abs(ours.predict(long_pairs)[0] - want[0]) > 1e-4  # the cut changed the score: the test means something


def test_a_logit_score_without_a_false_token(st, transformers, torch, reranker_dir, tmp_path):
    """A directory CrossEncoder saved (modules.json: its Transformer and a LogitScore) whose LogitScore's
    false_token_id is null: the score is the "yes" logit alone."""
    from sentence_transformers import CrossEncoder as TheirCrossEncoder

    source, _ = reranker_dir(True)
    saved = TheirCrossEncoder(str(source))
    saved[1].false_token_id = None
    directory = tmp_path / "logit-score"
    saved.save(str(directory))
    assert json.loads((directory / "1_LogitScore" / "config.json").read_text())["false_token_id"] is None
    theirs = TheirCrossEncoder(str(directory))
    want = theirs.predict(PAIRS)
    got = numbert.load(directory).predict(PAIRS)
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)
    np.testing.assert_allclose(
        numbert.load(directory).predict(PAIRS, activation_fn="identity"),
        theirs.predict(PAIRS, activation_fn=torch.nn.Identity()),
        atol=1e-4,
        rtol=1e-5,
    )


def test_the_seq_cls_conversion_scores_as_the_causal_lm(transformers, torch, reranker_dir, tmp_path):
    """Qwen3ForSequenceClassification with score.weight = lm_head's "yes" row minus its "no" row (what
    text-embeddings-inference and vLLM serve) scores as the causal LM, and as transformers computes it."""
    source, model = reranker_dir(False)
    config = causal_config(transformers, False, max_position_embeddings=1024, num_labels=1, pad_token_id=0)
    seq_cls = transformers.Qwen3ForSequenceClassification(config).eval()
    state = {k.removeprefix("model."): v for k, v in model.state_dict().items() if k.startswith("model.")}
    seq_cls.model.load_state_dict(state)
    with torch.no_grad():
        head = model.lm_head.weight
        seq_cls.score.weight.copy_((head[YES] - head[NO])[None])
    directory = tmp_path / "seq-cls"
    seq_cls.save_pretrained(directory)
    save_reranker_tokenizer(directory)
    got = numbert.load(directory).predict(PAIRS)
    np.testing.assert_allclose(got, numbert.load(source).predict(PAIRS), atol=ATOL, rtol=0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    for (query, document), score in zip(PAIRS, got):
        ids = tokenizer(reranker_prompt(query, document), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logit = seq_cls(input_ids=torch.tensor([ids])).logits[0, 0]
        assert abs(torch.sigmoid(logit).item() - score) < ATOL


def test_edge_cases_and_refusals(reranker_dir, transformers, torch, tmp_path):
    directory, _ = reranker_dir(True)
    ours = numbert.load(directory)
    assert ours.predict(PAIRS[0]).shape == ()  # one pair: its score alone
    assert ours.predict([]).shape == (0,)
    assert len(ours.rerank(QUERY, [""])) == 1  # an empty document
    with pytest.raises(ValueError, match="long='window'.*one prompt"):
        ours.predict(PAIRS, long="window")
    with pytest.raises(ValueError, match="unknown prompt_name 'query'"):
        ours.predict(PAIRS, prompt_name="query")
    assert ours.embed(["a text"]).shape == (1, SHAPE["hidden_size"])  # still a Qwen3: it embeds if asked
    # a Qwen3ForCausalLM whose tokenizer lacks "yes" and "no", with no LogitScore: refused naming them
    bare = tmp_path / "bare"
    transformers.Qwen3ForCausalLM(causal_config(transformers, True)).save_pretrained(bare)
    save_tokenizer("qwen3", bare)
    spec = json.loads((bare / "tokenizer.json").read_text())
    spec["model"]["unk_token"] = None
    (bare / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="no 'yes' and no 'no' token"):
        numbert.load(bare).rerank(QUERY, DOCUMENTS)


def test_a_reranker_made_without_torch_scores_pairs(tmp_path):
    model = numbert.load(write_qwen3_reranker(tmp_path / "reranker"))
    scores = model.predict(PAIRS)
    assert scores.shape == (len(PAIRS),) and np.isfinite(scores).all() and ((0 < scores) & (scores < 1)).all()


def test_without_a_template_the_card_s_prompt(transformers, torch, reranker_dir, tmp_path):
    import shutil

    source, model = reranker_dir(True)
    directory = tmp_path / "no-template"
    shutil.copytree(source, directory)
    (directory / "chat_template.jinja").unlink()
    got = numbert.load(directory).predict(PAIRS, prompt=INSTRUCTION)
    np.testing.assert_allclose(got, card_scores(transformers, torch, model, directory, PAIRS, INSTRUCTION), atol=ATOL)


def test_the_rerank_command(st, reranker_dir, tmp_path):
    from sentence_transformers import CrossEncoder as TheirCrossEncoder

    directory, _ = reranker_dir(True)
    documents = [d for d in DOCUMENTS if d]
    (tmp_path / "docs.txt").write_text("\n".join(documents) + "\n", encoding="utf-8")
    result = run("rerank", QUERY, "--file", tmp_path / "docs.txt", "--json", "--prompt", INSTRUCTION, model=directory)
    assert result.returncode == 0, result.stderr.decode()
    ours = [json.loads(line) for line in result.stdout.decode().splitlines()]
    theirs = TheirCrossEncoder(str(directory)).rank(QUERY, documents, prompt=INSTRUCTION, return_documents=True)
    assert [r["corpus_id"] for r in ours] == [r["corpus_id"] for r in theirs]
    np.testing.assert_allclose([r["score"] for r in ours], [r["score"] for r in theirs], atol=ATOL, rtol=0)
    window = run("rerank", QUERY, "--long", "window", "-f", tmp_path / "docs.txt", model=directory)
    assert "one prompt" in one_error_line(window)


def test_the_server_s_rerank_routes(st, reranker_dir):
    from helpers import ServerProcess
    from sentence_transformers import CrossEncoder as TheirCrossEncoder

    directory, _ = reranker_dir(False)
    theirs = TheirCrossEncoder(str(directory)).rank(QUERY, DOCUMENTS)
    server = ServerProcess(directory)
    try:
        tei = httpx.post(server.url + "/rerank", json={"query": QUERY, "texts": DOCUMENTS}, timeout=60)
        assert tei.status_code == 200, tei.text
        assert [r["index"] for r in tei.json()] == [r["corpus_id"] for r in theirs]
        np.testing.assert_allclose([r["score"] for r in tei.json()], [r["score"] for r in theirs], atol=ATOL)
        body = {"model": server.model_name, "query": QUERY, "documents": DOCUMENTS, "top_n": 2}
        cohere = httpx.post(server.url + "/v1/rerank", json=body, timeout=60)
        assert cohere.status_code == 200, cohere.text
        results = cohere.json()["results"]
        assert [r["index"] for r in results] == [r["corpus_id"] for r in theirs[:2]]
        np.testing.assert_allclose([r["relevance_score"] for r in results], [r["score"] for r in theirs[:2]], atol=ATOL)
        single = httpx.post(server.url + "/predict", json={"inputs": "one text"}, timeout=60)
        assert single.status_code == 422 and "pairs only" in single.json()["error"]["message"], single.text
        pairs = httpx.post(server.url + "/predict", json={"inputs": [list(p) for p in PAIRS]}, timeout=60)
        want = TheirCrossEncoder(str(directory)).predict(PAIRS)
        np.testing.assert_allclose([answer[0]["score"] for answer in pairs.json()], want, atol=ATOL, rtol=0)
        info = httpx.get(server.url + "/info", timeout=60).json()
        assert "reranker" in info["model_type"]
    finally:
        assert server.stop() == 0, "".join(server.lines)


def test_a_bert_cross_encoder_s_prompt_goes_before_the_query(st):
    """CrossEncoder.predict's prompt on a BERT cross-encoder (no chat template): put before each query."""
    from sentence_transformers import CrossEncoder as TheirCrossEncoder

    directory = str(FIXTURES / "cross_encoder")
    theirs, ours = TheirCrossEncoder(directory), numbert.load(directory)
    want = theirs.predict(PAIRS, prompt="query: ")
    np.testing.assert_allclose(ours.predict(PAIRS, prompt="query: "), want, atol=ATOL, rtol=0)
    assert not np.allclose(ours.predict(PAIRS), want, atol=ATOL)


def test_a_non_finite_score_row_is_said_once_in_one_line(tmp_path, caplog):
    """A NaN in the "yes" row the score reads: every score NaN, as for any non-finite weight (the contract), said in
    one warning line naming the model, with no NumPy warning on the way."""
    import warnings

    from safetensors.numpy import load_file, save_file

    directory = write_qwen3_reranker(tmp_path / "nan")
    (weights_file,) = directory.glob("*.safetensors")
    tensors = load_file(weights_file)
    table = next(name for name in tensors if name.endswith("embed_tokens.weight"))  # tied: the unembedding
    tensors[table][YES, 0] = np.nan
    save_file(tensors, weights_file)
    model = numbert.load(directory)
    with warnings.catch_warnings(), caplog.at_level("WARNING", logger="numbert"):
        warnings.simplefilter("error")
        scores = model.predict([("q", "d"), ("q2", "d2")])
        model.predict([("q3", "d3")])
    assert np.isnan(scores).all()
    said = [r.getMessage() for r in caplog.records if "sequence classifier" in r.getMessage()]
    assert len(said) == 1 and "\n" not in said[0] and str(directory) in said[0]
