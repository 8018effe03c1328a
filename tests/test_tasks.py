"""The tasks against transformers' pipelines (fill-mask, text-classification, token-classification) and, for QA
(transformers 5 has no pipeline for it), against the best span computed here from BertForQuestionAnswering's logits."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from test_cli import one_error_line, run

import numbert
from numbert.pipeline.tasks import Answer, Entity, Label, Prediction, top

CONLL = {
    i: label for i, label in enumerate(["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"])
}
NER_TEXTS = [
    "Hugging Face Inc. is a company based in New York City. Its headquarters are in DUMBO, near the Manhattan Bridge.",
    "Wolfgang Amadeus Mozart et Émilie du Châtelet ☃ visitèrent Zürich-Oerlikon, then ate gnocchi with Tschaikowsky.",
]
RTOL = 1e-4  # scores from logits within 1e-4


@pytest.fixture(scope="module")
def pipeline(transformers):
    """transformers.pipeline on a checkpoint made by head_checkpoint, with its own tokenizer."""

    def make(task, directory, model, **options):
        tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
        return transformers.pipeline(task, model=model, tokenizer=tokenizer, device="cpu", **options)

    return make


@pytest.fixture(scope="module")
def masked_lm(head_checkpoint):
    directory, reference = head_checkpoint("BertForMaskedLM", wide=True)
    return numbert.load(directory), directory, reference


@pytest.fixture(scope="module")
def tagger(head_checkpoint):
    directory, reference = head_checkpoint("BertForTokenClassification", id2label=CONLL)
    return numbert.load(directory), directory, reference


@pytest.fixture(scope="module")
def reader(head_checkpoint):
    directory, reference = head_checkpoint("BertForQuestionAnswering")
    return numbert.load(directory), directory, reference


# ----------------------------------------------------------------------------------------------
# fill-mask


def assert_same_predictions(ours: list[Prediction], theirs: list[dict]):
    assert [(p.id, p.token, p.sequence) for p in ours] == [(t["token"], t["token_str"], t["sequence"]) for t in theirs]
    np.testing.assert_allclose([p.score for p in ours], [t["score"] for t in theirs], rtol=RTOL)


@pytest.mark.parity
@pytest.mark.parametrize(
    "text, top_k",
    [
        ("The man worked as a [MASK].", 5),
        ("Paris is the [MASK] of France, n'est-ce pas? Naïve café!", 12),
    ],
)
def test_fill_mask_matches_the_pipeline(masked_lm, pipeline, text, top_k):
    model, directory, reference = masked_lm
    ours = model.fill_mask(text, top_k=top_k)
    assert len(ours) == top_k and all(isinstance(p, Prediction) for p in ours)
    assert_same_predictions(ours, pipeline("fill-mask", directory, reference)(text, top_k=top_k))


@pytest.mark.parity
def test_fill_mask_with_several_masks_gives_one_list_per_mask_as_the_pipeline(masked_lm, pipeline):
    model, directory, reference = masked_lm
    text = "The [MASK] worked as a [MASK] in [MASK]."
    ours = model.fill_mask(text, top_k=3)
    theirs = pipeline("fill-mask", directory, reference)(text, top_k=3)
    assert len(ours) == len(theirs) == 3
    for o, t in zip(ours, theirs):
        assert_same_predictions(o, t)
    assert ours[0][0].sequence.startswith("[CLS] the ") and ours[0][0].sequence.endswith(" in [MASK]. [SEP]")


def test_fill_mask_refuses_texts_without_a_mask_with_too_many_or_too_long(masked_lm):
    model = masked_lm[0]
    with pytest.raises(ValueError, match=r"fill_mask needs a \[MASK\] token in the text; there is none in 'no mask'"):
        model.fill_mask("no mask")
    with pytest.raises(ValueError, match=r"the text has 11 \[MASK\] tokens, more than max_masks=10"):
        model.fill_mask("[MASK] " * 11)
    assert len(model.fill_mask("[MASK] " * 11, top_k=1, max_masks=11)) == 11
    with pytest.raises(
        ValueError, match="the text is 602 tokens long; this model reads at most 512 and fill_mask does not truncate"
    ):
        model.fill_mask("[MASK] " + "word " * 599)
    with pytest.raises(ValueError, match="top_k must be a positive integer, got 0"):
        model.fill_mask("a [MASK]", top_k=0)
    with pytest.raises(TypeError, match="fill_mask takes text as a str, not list"):
        model.fill_mask(["a [MASK]"])


def test_top_gives_the_k_largest_of_each_row_best_first():
    scores = np.array([[0.1, 0.5, 0.3, 0.9], [4.0, 3.0, 2.0, 1.0]], np.float32)
    np.testing.assert_array_equal(top(scores, 2), [[3, 1], [0, 1]])
    np.testing.assert_array_equal(top(scores[0], 10), [3, 1, 2, 0])


# ----------------------------------------------------------------------------------------------
# next sentence


@pytest.mark.parity
def test_is_next_is_the_softmax_of_the_next_sentence_logits(head_checkpoint, torch):
    directory, reference = head_checkpoint("BertForNextSentencePrediction")
    model = numbert.load(directory)
    a, b = "The cat sat on the mat.", "It fell asleep."
    encoding = model.tokenizer.encode(a, b)
    with torch.no_grad():
        logits = reference(input_ids=torch.tensor([encoding.ids]), token_type_ids=torch.tensor([encoding.type_ids]))
    expected = torch.softmax(logits.logits[0], -1)[0].item()
    assert model.is_next(a, b) == pytest.approx(expected, rel=RTOL)
    with pytest.raises(TypeError, match="is_next takes text as a str, not NoneType"):
        model.is_next("a", None)


# ----------------------------------------------------------------------------------------------
# text classification


@pytest.mark.parity
@pytest.mark.parametrize(
    "config, function",
    [
        ({"id2label": {0: "negative", 1: "neutral", 2: "positive"}}, "softmax"),
        ({"num_labels": 4, "problem_type": "multi_label_classification"}, "sigmoid"),
        ({"num_labels": 1, "problem_type": "regression"}, "none"),
        ({"num_labels": 1}, "sigmoid"),  # one label and no problem_type: the pipeline's sigmoid
    ],
)
def test_classify_matches_the_text_classification_pipeline(head_checkpoint, pipeline, config, function):
    directory, reference = head_checkpoint("BertForSequenceClassification", **config)
    model = numbert.load(directory)
    classifier = pipeline("text-classification", directory, reference, top_k=None)
    texts = ["I loved this film.", "Worst. Service. Ever!", "A long and winding sentence " * 12]
    ours = model.classify(texts)
    theirs = classifier(texts)
    for o, t in zip(ours, theirs):
        assert all(isinstance(label, Label) for label in o)
        assert [label.label for label in o] == [x["label"] for x in t]
        np.testing.assert_allclose([label.score for label in o], [x["score"] for x in t], rtol=RTOL, atol=1e-6)
    [(label, score)] = model.classify("Is it raining?", "The streets are wet.", top_k=1)
    [expected] = classifier({"text": "Is it raining?", "text_pair": "The streets are wet."}, top_k=1)
    assert label == expected["label"] and score == pytest.approx(expected["score"], rel=RTOL)
    np.testing.assert_allclose(
        [s for _, s in model.classify(texts[0], function=function)], [s for _, s in model.classify(texts[0])], rtol=0
    )


def test_classify_refuses_an_unknown_score_function(head_checkpoint):
    model = numbert.load(head_checkpoint("BertForSequenceClassification", num_labels=1)[0])
    with pytest.raises(ValueError, match="unknown function 'argmax'; use one of softmax, sigmoid, none"):
        model.classify("a", function="argmax")


def test_classify_names_a_text_that_is_not_one(head_checkpoint):
    model = numbert.load(head_checkpoint("BertForSequenceClassification", num_labels=1)[0])
    with pytest.raises(TypeError, match="^text must be a str or a list of str, not NoneType$"):
        model.classify(None)
    with pytest.raises(TypeError, match=r"^text_pair\[1\] is a int, not a str$"):
        model.classify(["a", "b"], ["c", 5])  # None is a text without a pair
    with pytest.raises(TypeError, match="text and text_pair must both be a str or both lists of str"):
        model.classify("a", ["b"])


# ----------------------------------------------------------------------------------------------
# token classification


def assert_same_entities(ours: list[Entity], theirs: list[dict], grouped: bool):
    key = "entity_group" if grouped else "entity"
    assert [(e.entity, e.word, e.start, e.end) for e in ours] == [
        (t[key], t["word"], t["start"], t["end"]) for t in theirs
    ]
    if not grouped:
        assert [e.token_index for e in ours] == [t["index"] for t in theirs]
    np.testing.assert_allclose([e.score for e in ours], [float(t["score"]) for t in theirs], rtol=RTOL)


@pytest.mark.parity
@pytest.mark.parametrize("aggregation", ["none", "simple", "first", "average", "max"])
@pytest.mark.parametrize("ignore_labels", [("O",), ()])
def test_ner_matches_the_token_classification_pipeline(tagger, pipeline, aggregation, ignore_labels):
    model, directory, reference = tagger
    tag = pipeline(
        "token-classification",
        directory,
        reference,
        aggregation_strategy=aggregation,
        ignore_labels=list(ignore_labels),
    )
    ours = model.ner(NER_TEXTS, aggregation=aggregation, ignore_labels=ignore_labels)
    for text, o, t in zip(NER_TEXTS, ours, tag(NER_TEXTS)):
        assert o and all(isinstance(e, Entity) for e in o)
        assert_same_entities(o, t, grouped=aggregation != "none")
        if not ignore_labels:  # every token is in one entity, in order: their spans cover the text
            assert "".join(text[e.start : e.end] for e in o).replace(" ", "") == text.replace(" ", "")


@pytest.mark.parity
@pytest.mark.parametrize("aggregation", ["simple", "first", "average", "max"])
def test_ner_stride_windows_match_the_pipeline(tagger, pipeline, tmp_path, aggregation):
    """A text longer than the tokenizer's model_max_length (here 24) runs as windows overlapping by `stride`."""
    _, directory, reference = tagger
    shutil.copytree(directory, tmp_path, dirs_exist_ok=True)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": 24}))
    model = numbert.load(tmp_path)
    text = " ".join(NER_TEXTS)
    tag = pipeline("token-classification", tmp_path, reference, aggregation_strategy=aggregation, ignore_labels=[])
    assert_same_entities(
        model.ner(text, aggregation=aggregation, stride=8, ignore_labels=()), tag(text, stride=8), grouped=True
    )


def test_ner_refuses_unknown_aggregations_and_stride_without_one(tagger):
    model = tagger[0]
    with pytest.raises(ValueError, match="unknown aggregation 'longest'; use one of none, simple, first, average, max"):
        model.ner("a", aggregation="longest")
    with pytest.raises(ValueError, match="stride runs a long text as windows"):
        model.ner("a", aggregation="none", stride=16)
    with pytest.raises(TypeError, match=r"^text\[1\] is a int, not a str$"):
        model.ner(["a", 3])
    with pytest.raises(TypeError, match="^text must be a str or a list of str, not NoneType$"):
        model.ner(None)


# ----------------------------------------------------------------------------------------------
# extractive question answering: the best span, computed here as transformers 4's pipeline defines it


def expected_answers(
    transformers,
    torch,
    directory,
    reference,
    question,
    context,
    *,
    max_seq_len=384,
    doc_stride=128,
    max_answer_len=15,
    top_k=1,
):
    """The top_k (score, start, end) spans by brute force over transformers' own windows and logits."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    windows = tokenizer(
        question,
        context,
        truncation="only_second",
        max_length=max_seq_len,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=True,
        return_tensors="pt",
    )
    with torch.no_grad():
        out = reference(
            input_ids=windows["input_ids"],
            token_type_ids=windows["token_type_ids"],
            attention_mask=windows["attention_mask"],
        )
    spans = []
    for w in range(len(windows["input_ids"])):
        sequence_ids = windows.sequence_ids(w)
        allowed = np.array([s == 1 for s in sequence_ids])
        allowed[0] = True  # [CLS]
        probs = [
            torch.softmax(torch.where(torch.tensor(allowed), logits[w], -10000.0), -1).numpy()
            for logits in (out.start_logits, out.end_logits)
        ]
        context_tokens = [i for i, s in enumerate(sequence_ids) if s == 1]
        encoding = windows.encodings[w]
        for s in context_tokens:
            for e in context_tokens:
                if s <= e < s + max_answer_len:
                    start = encoding.word_to_chars(encoding.token_to_word(s), sequence_index=1)[0]
                    end = encoding.word_to_chars(encoding.token_to_word(e), sequence_index=1)[1]
                    spans.append((float(probs[0][s] * probs[1][e]), start, end))
    return sorted(spans, key=lambda x: -x[0])[:top_k], len(windows["input_ids"])


def assert_same_answers(ours: list[Answer], expected, context):
    assert [(a.start, a.end) for a in ours] == [(s, e) for _, s, e in expected]
    assert [a.answer for a in ours] == [context[s:e] for _, s, e in expected]
    np.testing.assert_allclose([a.score for a in ours], [score for score, _, _ in expected], rtol=RTOL)


@pytest.mark.parity
def test_qa_finds_the_best_span_of_the_logits(reader, transformers, torch):
    model, directory, reference = reader
    question, context = "Where do I live?", "My name is Wolfgang and I live in Berlin, near the Brandenburger Tor."
    answer = model.qa(question, context)
    assert isinstance(answer, Answer) and context[answer.start : answer.end] == answer.answer
    expected, windows = expected_answers(transformers, torch, directory, reference, question, context, top_k=3)
    assert windows == 1
    assert_same_answers([answer], expected[:1], context)
    assert_same_answers(model.qa(question, context, top_k=3), expected, context)


@pytest.mark.parity
@pytest.mark.parametrize("max_seq_len, doc_stride", [(None, None), (48, 16)])
def test_qa_runs_a_long_context_as_overlapping_windows(reader, transformers, torch, max_seq_len, doc_stride):
    model, directory, reference = reader
    question = "What did the scientists discover?"
    context = (
        "In 1953 the scientists in Cambridge discovered the double helix, the structure of DNA. " * 3
        + "Meanwhile, in an unrelated laboratory, a cat knocked over seventeen beakers of tea. " * 24
    )
    options = {} if max_seq_len is None else {"max_seq_len": max_seq_len, "doc_stride": doc_stride}
    expected, windows = expected_answers(
        transformers, torch, directory, reference, question, context, top_k=4, **options
    )
    assert windows >= 2
    assert_same_answers(model.qa(question, context, top_k=4, **options), expected, context)
    assert_same_answers(model.qa(question, context, top_k=4, batch_size=1, **options), expected, context)


@pytest.mark.parity
def test_qa_impossible_answer_is_scored_by_cls(reader, torch):
    model, _, reference = reader
    question, context = "Who?", "Nobody knows the answer to this one."
    encoding = model.tokenizer.encode(question, context)
    with torch.no_grad():
        out = reference(input_ids=torch.tensor([encoding.ids]), token_type_ids=torch.tensor([encoding.type_ids]))
    allowed = torch.tensor([s == 1 for s in encoding.sequence_ids])
    allowed[0] = True
    p = [
        torch.softmax(torch.where(allowed, logits[0], -10000.0), -1)[0].item()
        for logits in (out.start_logits, out.end_logits)
    ]
    answers = model.qa(question, context, top_k=50, handle_impossible_answer=True)
    null = next(a for a in answers if a.answer == "")
    assert (null.start, null.end) == (0, 0) and null.score == pytest.approx(p[0] * p[1], rel=RTOL)
    assert [a.score for a in answers] == sorted((a.score for a in answers), reverse=True)


def test_qa_refuses_a_question_longer_than_the_model_reads(reader):
    model = reader[0]
    with pytest.raises(
        ValueError,
        match="the question is 600 tokens long, which leaves no room for the context in "
        r"max_seq_len=384 tokens \(\[CLS\] question \[SEP\] context \[SEP\]\); "
        "shorten the question or raise max_seq_len",
    ):
        model.qa("why " * 600, "Because.")
    with pytest.raises(
        ValueError, match="the question is 600 tokens long.*in max_seq_len=512 tokens.*; shorten the question$"
    ):
        model.qa("why " * 600, "Because.", max_seq_len=512)
    with pytest.raises(
        ValueError, match="the context must run as windows of 81 tokens .* which doc_stride=128 must be smaller than"
    ):
        model.qa("why " * 300, "Because. " * 100)
    assert model.qa("why " * 300, "Because").answer == "Because"  # a short context fits beside it
    with pytest.raises(ValueError, match="context is empty"):
        model.qa("Who?", "  ")
    with pytest.raises(ValueError, match="max_seq_len must lie between 4 and the model's 512 positions, got 1000"):
        model.qa("Who?", "Me.", max_seq_len=1000)
    with pytest.raises(ValueError, match="doc_stride must be an integer >= 0, got -1"):
        model.qa("Who?", "Me.", doc_stride=-1)


# ----------------------------------------------------------------------------------------------
# the commands: numbert fill-mask | classify | ner | qa


def json_lines(result) -> list[dict]:
    assert result.returncode == 0, result.stderr.decode()
    return [json.loads(line) for line in result.stdout.decode().splitlines()]


def test_fill_mask_command_streams_one_json_line_per_input(masked_lm):
    model, directory, _ = masked_lm
    texts = ["The man worked as a [MASK].", "[MASK] is the capital of [MASK].", "Naïve café [MASK]!"]
    records = json_lines(
        run("fill-mask", "--json", "-k", "3", model=directory, stdin="\n".join(texts).encode() + b"\n")
    )
    assert [r["text"] for r in records] == texts
    for text, record in zip(texts, records):
        found = model.fill_mask(text, top_k=3)
        masks = found if isinstance(found[0], list) else [found]
        assert [[(g["token"], g["id"], g["sequence"]) for g in mask] for mask in record["predictions"]] == [
            [(g.token, g.id, g.sequence) for g in mask] for mask in masks
        ]
    shown = run("fill-mask", "The man worked as a [MASK].", model=directory).stdout.decode().splitlines()
    guesses = model.fill_mask("The man worked as a [MASK].")
    assert [line.split()[0] for line in shown[:5]] == [g.token for g in guesses] and shown[5] == ""


def test_fill_mask_command_names_the_line_without_a_mask_and_the_missing_head(masked_lm, minilm_dir):
    error = one_error_line(run("fill-mask", model=masked_lm[1], stdin=b"a [MASK].\nno mask here\n"))
    assert (
        error == "numbert fill-mask: error: line 2: fill_mask needs a [MASK] token in the text; there is none "
        "in 'no mask here'"
    )
    error = one_error_line(run("fill-mask", "a [MASK].", model=minilm_dir))
    assert error.startswith("numbert fill-mask: error: ") and "has no masked-LM head" in error


def test_classify_command_reads_pairs_and_gives_top_k(head_checkpoint):
    labels = {0: "negative", 1: "neutral", 2: "positive"}
    directory, _ = head_checkpoint("BertForSequenceClassification", id2label=labels)
    model = numbert.load(directory)
    lines = ["I loved this film.", "Is it raining? ||| The streets are wet.", ""]
    records = json_lines(run("classify", "--json", "-k", "2", model=directory, stdin="\n".join(lines).encode() + b"\n"))
    expected = [
        model.classify(lines[0], top_k=2),
        model.classify("Is it raining?", "The streets are wet.", top_k=2),
        model.classify("", top_k=2),
    ]
    for record, labels in zip(records, expected, strict=True):
        assert [x["label"] for x in record["labels"]] == [label.label for label in labels]
        np.testing.assert_allclose([x["score"] for x in record["labels"]], [s for _, s in labels], rtol=1e-6)
    best = run("classify", lines[0], model=directory).stdout.decode().split()
    assert best[0] == expected[0][0].label and float(best[1]) == pytest.approx(expected[0][0].score, abs=1e-4)


def test_ner_command_lists_entities_with_offsets(tagger):
    model, directory, _ = tagger
    records = json_lines(
        run("ner", "--json", "--aggregation", "first", model=directory, stdin="\n".join(NER_TEXTS).encode())
    )
    for text, record in zip(NER_TEXTS, records, strict=True):
        expected = model.ner(text, aggregation="first")
        assert [(e["entity"], e["start"], e["end"]) for e in record["entities"]] == [
            (e.entity, e.start, e.end) for e in expected
        ]
    shown = run("ner", NER_TEXTS[0], "--ignore", model=directory).stdout.decode().split("\n")
    entities = model.ner(NER_TEXTS[0], ignore_labels=())
    assert [line.split("\t")[:2] for line in shown[: len(entities)]] == [
        [NER_TEXTS[0][e.start : e.end], e.entity] for e in entities
    ]
    assert shown[len(entities)] == ""


def test_qa_command_takes_a_question_and_context_or_lines_of_them(reader, tmp_path):
    model, directory, _ = reader
    question, context = "Where do I live?", "My name is Wolfgang and I live in Berlin."
    expected = model.qa(question, context)
    answer, score, start, end = run("qa", "-q", question, "-c", context, model=directory).stdout.decode().split("\t")
    assert (answer, int(start), int(end)) == (expected.answer, expected.start, expected.end)
    assert float(score) == pytest.approx(expected.score, abs=1e-4)
    records = json_lines(run("qa", "--json", model=directory, stdin=f"{question} ||| {context}\n".encode()))
    assert records[0]["answers"][0]["answer"] == expected.answer
    (tmp_path / "context.txt").write_text(context, encoding="utf-8")
    records = json_lines(
        run(
            "qa",
            "--json",
            "--context-file",
            tmp_path / "context.txt",
            model=directory,
            stdin=b"Where do I live?\nWhat is my name?\n",
        )
    )
    assert [r["question"] for r in records] == ["Where do I live?", "What is my name?"]
    assert records[0]["answers"][0]["answer"] == expected.answer
    error = one_error_line(run("qa", model=directory, stdin=b"no context here\n"))
    assert error == "numbert qa: error: line 1: without --context, each line is 'question ||| context'"
