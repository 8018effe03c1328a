"""The heads' maths and loading: logits against transformers' BertFor* models, legacy names, missing weights."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import numbert
from numbert.model.config import BertConfig
from numbert.model.heads import HeadConfig, classifier_logits, masked_lm_logits, sigmoid, softmax
from numbert.testing import write_google_bert, write_random_bert

FIXTURE = Path(__file__).parent / "fixtures" / "heads_expected.json"
FIXTURE_TEXTS = ["The man worked as a [MASK].", "Paris is the [MASK] of [MASK], n'est-ce pas?"]
TEXT = "The man worked as a [MASK] in Paris."
PAIR = ("The cat sat on the mat.", "It was tired, so it fell asleep.")
ATOL = 1e-4


def torch_logits(torch, model, encoding):
    """The transformers model's outputs on numbert's token ids (the tokenizers agree; tested elsewhere)."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([encoding.ids]), token_type_ids=torch.tensor([encoding.type_ids]))


def mlm_logits(model: numbert.Bert, out: numbert.Output) -> np.ndarray:
    c = model.config
    return masked_lm_logits(out.last_hidden_state, model.heads.masked_lm, c.layer_norm_eps)


# ----------------------------------------------------------------------------------------------
# logits against transformers


@pytest.mark.parity
def test_masked_lm_logits_match_bert_for_masked_lm_at_bert_base_size(head_checkpoint, torch):
    """The vocabulary-sized decoder at bert-base's width (768 x 30522), tied to the word embeddings."""
    directory, reference = head_checkpoint("BertForMaskedLM", wide=True)
    model = numbert.load(directory)
    out = model(TEXT)
    logits = mlm_logits(model, out)
    expected = torch_logits(torch, reference, out.encodings[0]).logits[0].numpy()
    assert logits.shape == expected.shape == (len(out.tokens), 30522) and logits.dtype == np.float32
    np.testing.assert_allclose(logits, expected, atol=ATOL, rtol=0)
    assert model.heads.masked_lm.decoder is model.encoder.word_embeddings  # tied: no copy of the 94 MB matrix


def assert_pre_training_heads_match(model, torch, reference):
    """Masked-LM and next-sentence logits of `model` on PAIR equal BertForPreTraining `reference`'s."""
    out = model(*PAIR)
    expected = torch_logits(torch, reference, out.encodings[0])
    np.testing.assert_allclose(mlm_logits(model, out), expected.prediction_logits[0].numpy(), atol=ATOL, rtol=0)
    np.testing.assert_allclose(
        classifier_logits(out.pooler_output, model.heads.next_sentence),
        expected.seq_relationship_logits[0].numpy(),
        atol=ATOL,
        rtol=0,
    )


@pytest.mark.parity
def test_pre_training_heads_match_bert_for_pre_training(head_checkpoint, torch):
    directory, reference = head_checkpoint("BertForPreTraining")
    model = numbert.load(directory)
    assert_pre_training_heads_match(model, torch, reference)


@pytest.mark.parity
def test_next_sentence_logits_match_bert_for_next_sentence_prediction(head_checkpoint, torch):
    directory, reference = head_checkpoint("BertForNextSentencePrediction")
    model = numbert.load(directory)
    out = model(*PAIR)
    expected = torch_logits(torch, reference, out.encodings[0]).logits[0].numpy()
    np.testing.assert_allclose(
        classifier_logits(out.pooler_output, model.heads.next_sentence), expected, atol=ATOL, rtol=0
    )


@pytest.mark.parity
def test_sequence_classifier_logits_match_bert_for_sequence_classification(head_checkpoint, torch):
    directory, reference = head_checkpoint("BertForSequenceClassification", id2label={0: "neg", 1: "neu", 2: "pos"})
    model = numbert.load(directory)
    out = model(*PAIR)
    expected = torch_logits(torch, reference, out.encodings[0]).logits[0].numpy()
    np.testing.assert_allclose(
        classifier_logits(out.pooler_output, model.heads.sequence_classifier.out), expected, atol=ATOL, rtol=0
    )
    assert model.heads.labels == ["neg", "neu", "pos"]


@pytest.mark.parity
def test_token_classifier_logits_match_bert_for_token_classification(head_checkpoint, torch):
    directory, reference = head_checkpoint("BertForTokenClassification", num_labels=5)
    model = numbert.load(directory)
    out = model("Hugging Face is based in New York City.")
    expected = torch_logits(torch, reference, out.encodings[0]).logits[0].numpy()
    np.testing.assert_allclose(
        classifier_logits(out.last_hidden_state, model.heads.token_classifier), expected, atol=ATOL, rtol=0
    )
    assert model.heads.labels == [f"LABEL_{i}" for i in range(5)]  # transformers' names without id2label


@pytest.mark.parity
def test_qa_logits_match_bert_for_question_answering(head_checkpoint, torch):
    directory, reference = head_checkpoint("BertForQuestionAnswering")
    model = numbert.load(directory)
    out = model("Where do I live?", "My name is Wolfgang and I live in Berlin.")
    expected = torch_logits(torch, reference, out.encodings[0])
    logits = classifier_logits(out.last_hidden_state, model.heads.question_answering)  # (seq, 2): start, end
    start, end = logits[:, 0], logits[:, 1]
    np.testing.assert_allclose(start, expected.start_logits[0].numpy(), atol=ATOL, rtol=0)
    np.testing.assert_allclose(end, expected.end_logits[0].numpy(), atol=ATOL, rtol=0)


@pytest.mark.parity
def test_untied_decoder_is_read_from_the_checkpoint(head_checkpoint, torch):
    directory, reference = head_checkpoint("BertForMaskedLM", tie_word_embeddings=False)
    assert "cls.predictions.decoder.weight" in load_file(directory / "model.safetensors")
    model = numbert.load(directory)
    out = model(TEXT)
    assert model.heads.masked_lm.decoder is not model.encoder.word_embeddings
    np.testing.assert_allclose(
        mlm_logits(model, out), torch_logits(torch, reference, out.encodings[0]).logits[0], atol=ATOL, rtol=0
    )


@pytest.mark.parity
def test_bert_base_uncased_naming_in_a_pytorch_bin_loads_both_pre_training_heads(head_checkpoint, torch, tmp_path):
    """As the published bert-base-uncased: `bert.` prefix, LayerNorm gamma/beta (the heads' too), the decoder's
    weight saved beside the embeddings it is tied to, in a pytorch_model.bin."""
    directory, reference = head_checkpoint("BertForPreTraining")
    state = {
        name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): t
        for name, t in reference.state_dict().items()
    }
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    assert "cls.predictions.transform.LayerNorm.gamma" in state
    torch.save(state, tmp_path / "pytorch_model.bin")
    for name in ("config.json", "vocab.txt", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((directory / name).read_bytes())
    model = numbert.load(tmp_path)
    assert_pre_training_heads_match(model, torch, reference)


def test_the_decoder_bias_is_found_under_its_older_name(head_checkpoint, tmp_path):
    """Some checkpoints keep the masked-LM bias only as cls.predictions.decoder.bias."""
    directory, _ = head_checkpoint("BertForPreTraining")
    tensors = load_file(directory / "model.safetensors")
    tensors["cls.predictions.decoder.bias"] = tensors.pop("cls.predictions.bias")
    save_file(tensors, str(tmp_path / "model.safetensors"))
    for name in ("config.json", "vocab.txt"):
        (tmp_path / name).write_bytes((directory / name).read_bytes())
    assert numbert.load(tmp_path).fill_mask(TEXT) == numbert.load(directory).fill_mask(TEXT)


def test_a_google_tensorflow_checkpoint_carries_the_same_pre_training_heads(vocab_path, tmp_path):
    """bert_model.ckpt names them cls/predictions/output_bias, cls/seq_relationship/output_weights (2, hidden),
    kernels (in, out): the same random weights (seed 0) as safetensors give the same answers."""
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
    google = numbert.load(write_google_bert(tmp_path / "google", vocab_path, config, heads=True))
    ours = numbert.load(write_random_bert(tmp_path / "safetensors", vocab_path, config))
    g, o = google.fill_mask(TEXT), ours.fill_mask(TEXT)  # kernels transposed: the sums run in another order
    assert [(p.id, p.sequence) for p in g] == [(p.id, p.sequence) for p in o]
    np.testing.assert_allclose([p.score for p in g], [p.score for p in o], rtol=1e-5)
    assert google.is_next(*PAIR) == pytest.approx(ours.is_next(*PAIR), rel=1e-5)


# ----------------------------------------------------------------------------------------------
# missing or mismatched heads


def test_a_model_without_heads_names_the_tensors_each_task_lacks(minilm):
    model = minilm
    assert model.heads.available() == []
    for task, call, tensor in [
        ("masked-LM", lambda: model.fill_mask("a [MASK]."), "'cls.predictions.transform.dense.weight'"),
        ("next-sentence", lambda: model.is_next("a", "b"), "'cls.seq_relationship.weight'"),
        ("BertForSequenceClassification", lambda: model.classify("a"), "'classifier.weight'"),
        ("BertForTokenClassification", lambda: model.ner("a"), "'classifier.weight'"),
        ("question-answering", lambda: model.qa("a?", "b"), "'qa_outputs.weight'"),
    ]:
        with pytest.raises(ValueError, match=f"has no {task} (head|classifier): its checkpoint lacks tensors") as e:
            call()
        assert tensor in str(e.value) and "architectures: BertModel" in str(e.value)


def test_an_incomplete_head_names_exactly_the_missing_tensor(head_checkpoint, tmp_path):
    directory, _ = head_checkpoint("BertForPreTraining")
    tensors = load_file(directory / "model.safetensors")
    del tensors["cls.predictions.transform.LayerNorm.bias"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    for name in ("config.json", "vocab.txt"):
        (tmp_path / name).write_bytes((directory / name).read_bytes())
    model = numbert.load(tmp_path)
    with pytest.raises(
        ValueError,
        match=r"lacks tensor 'cls.predictions.transform.LayerNorm.bias' "
        r"\(config.json's architectures: BertForPreTraining; it has masked_lm, "
        r"next_sentence\)",
    ):
        model.fill_mask(TEXT)
    assert 0 <= model.is_next(*PAIR) <= 1  # the other head is whole


def test_a_misshapen_head_tensor_is_named(head_checkpoint, tmp_path):
    directory, _ = head_checkpoint("BertForQuestionAnswering")
    tensors = load_file(directory / "model.safetensors")
    tensors["qa_outputs.weight"] = tensors["qa_outputs.weight"][:, :16].copy()
    save_file(tensors, str(tmp_path / "model.safetensors"))
    for name in ("config.json", "vocab.txt"):
        (tmp_path / name).write_bytes((directory / name).read_bytes())
    with pytest.raises(ValueError, match=r"tensor 'qa_outputs.weight' has shape \(2, 16\), expected \(2, 32\)"):
        numbert.load(tmp_path).qa("Who?", "Me.")


def test_a_classifier_serves_the_task_its_architecture_names(head_checkpoint):
    tokens = numbert.load(head_checkpoint("BertForTokenClassification", num_labels=5)[0])
    with pytest.raises(ValueError, match="belongs to a BertForTokenClassification .*; use ner instead"):
        tokens.classify("a text")
    directory, _ = head_checkpoint("BertForSequenceClassification", id2label={0: "neg", 1: "neu", 2: "pos"})
    sequences = numbert.load(directory)
    with pytest.raises(ValueError, match="belongs to a BertForSequenceClassification .*; use classify instead"):
        sequences.ner("a text")


def test_id2label_must_agree_with_the_classifier(head_checkpoint, tmp_path):
    directory, _ = head_checkpoint("BertForSequenceClassification", id2label={0: "neg", 1: "neu", 2: "pos"})
    for name in ("model.safetensors", "vocab.txt"):
        (tmp_path / name).write_bytes((directory / name).read_bytes())
    config = json.loads((directory / "config.json").read_text())
    config["id2label"] = {"0": "neg", "1": "pos"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="id2label names 2 labels but the classifier has 3 outputs"):
        numbert.load(tmp_path).classify("a text")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("problem_type", "ranking", "unknown problem_type 'ranking'"),
        ("id2label", {"0": "a", "2": "b"}, r"id2label must number its labels 0, 1, 2, ...; got ids \[0, 2\]"),
        ("id2label", ["a", "b"], "id2label must map label ids to names"),
        ("architectures", "BertForMaskedLM", "architectures must be a list of names"),
    ],
)
def test_bad_head_fields_in_config_json_are_named(field, value, message):
    with pytest.raises(ValueError, match=f"^config.json: {message}"):
        HeadConfig.from_dict({field: value}, source="config.json")


# ----------------------------------------------------------------------------------------------
# committed outputs of transformers on the random bert-base (with bert-base-uncased's pre-training heads)


def transformers_outputs(directory: Path) -> dict:
    """fill-mask pipeline guesses (top 5 for each [MASK]) and the next-sentence probability, by transformers."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    fill = transformers.pipeline(
        "fill-mask", model=transformers.BertForMaskedLM.from_pretrained(directory), tokenizer=tokenizer, device="cpu"
    )
    guesses = {}
    for text in FIXTURE_TEXTS:
        found = fill(text)
        found = found if isinstance(found[0], list) else [found]  # one list per [MASK]
        guesses[text] = [[[g["token"], g["token_str"], g["score"], g["sequence"]] for g in mask] for mask in found]
    nsp = transformers.BertForNextSentencePrediction.from_pretrained(directory).eval()
    with torch.no_grad():
        logits = nsp(**tokenizer(*PAIR, return_tensors="pt")).logits[0]
    return {"fill_mask": guesses, "is_next": torch.softmax(logits, -1)[0].item()}


def numbert_outputs(model: numbert.Bert) -> dict:
    guesses = {}
    for text in FIXTURE_TEXTS:
        found = model.fill_mask(text)
        found = found if isinstance(found[0], list) else [found]
        guesses[text] = [[[g.id, g.token, g.score, g.sequence] for g in mask] for mask in found]
    return {"fill_mask": guesses, "is_next": model.is_next(*PAIR)}


def assert_same_outputs(ours: dict, expected: dict):
    assert ours["fill_mask"].keys() == expected["fill_mask"].keys()
    for text, masks in expected["fill_mask"].items():
        for o, e in zip(ours["fill_mask"][text], masks, strict=True):
            assert [(i, t, seq) for i, t, _, seq in o] == [(i, t, seq) for i, t, _, seq in e], text
            np.testing.assert_allclose([g[2] for g in o], [g[2] for g in e], rtol=1e-4, err_msg=text)
    assert ours["is_next"] == pytest.approx(expected["is_next"], rel=1e-4)


def test_bert_base_heads_give_the_committed_transformers_outputs(bert_base):
    """Without torch: fill_mask and is_next on the random bert-base against transformers' saved answers
    (scripts/make_heads_fixture.py writes them)."""
    assert_same_outputs(numbert_outputs(bert_base), json.loads(FIXTURE.read_text("utf-8")))


@pytest.mark.parity
def test_the_committed_outputs_are_still_transformers(bert_base_dir, transformers, torch):
    assert_same_outputs(transformers_outputs(bert_base_dir), json.loads(FIXTURE.read_text("utf-8")))


# ----------------------------------------------------------------------------------------------
# the small functions


def test_softmax_and_sigmoid_are_float32_and_never_overflow():
    x = np.array([[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p, s = softmax(x), sigmoid(x)
    assert p.dtype == s.dtype == np.float32
    np.testing.assert_allclose(p.sum(-1), 1, rtol=1e-6)
    np.testing.assert_allclose(p[1], np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum(), rtol=1e-6)
    np.testing.assert_allclose(s[0], [1, 0.5, 0], atol=0)
    np.testing.assert_allclose(s[1], 1 / (1 + np.exp(-np.array([1.0, 2.0, 3.0]))), rtol=1e-6)
    assert x[0, 0] == 1000  # softmax did not write over its input
