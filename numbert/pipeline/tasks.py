"""Text in, answers out: fill-mask, next sentence, classification, NER and extractive QA.

Each task takes a model (numbert.Bert, which carries its tokenizer and its heads) and text: it runs
the encoder, applies a head (numbert.model.heads, where the maths is) and turns the numbers back into
text, as transformers' pipelines do:

    fill_mask   fill-mask pipeline: top-k tokens for each [MASK], softmax over the vocabulary
    is_next     next-sentence prediction: the probability that B follows A
    classify    text-classification pipeline: softmax, sigmoid or raw scores per label
    ner         token-classification pipeline: a label per token, grouped into entities with
                character offsets ("none", "simple", "first", "average", "max")
    qa          question-answering pipeline of transformers 4 (transformers 5 has none): the best
                context span by P(start) P(end), over overlapping windows of a long context
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ..model.heads import classifier_logits, masked_lm_logits, sigmoid, softmax
from ..tokenizer import Encoding, Tokenizer
from .embedding import batches
from .pipeline import Pipeline
from .planner import by_length, row_of, text_list
from .readouts import SpanLogits, TokenLogits

MAX_MASKS = 10  # fill_mask's default limit: each [MASK] is predicted on its own, which means little beyond a few
AGGREGATIONS = ("none", "simple", "first", "average", "max")
SCORE_FUNCTIONS = {"softmax": softmax, "sigmoid": sigmoid, "none": lambda logits: logits}


class Prediction(NamedTuple):
    """One guess for a [MASK]: the token, its id, its probability, and the text with the guess in its place."""

    token: str
    id: int
    score: float
    sequence: str


class Label(NamedTuple):
    """A class of a text classifier and its score (a probability, or the raw value of a regression)."""

    label: str
    score: float


class Entity(NamedTuple):
    """A labelled token (aggregation "none") or a group of tokens (the other aggregations).

    `entity` is the label ("B-PER") of a token, or the group's label without its B-/I- prefix ("PER").
    `start`, `end`: the span in the original text, so text[start:end] is the entity as written.
    """

    entity: str
    score: float
    word: str  # the tokens joined back into a word (lowercase for an uncased model)
    start: int
    end: int
    token_index: int | None = None  # the token's position in the encoding (transformers' "index"), aggregation "none"


class Answer(NamedTuple):
    """A span of the context answering the question: context[start:end] == answer."""

    answer: str
    score: float  # P(start) P(end)
    start: int
    end: int


# ---------------------------------------------------------------------------------------------
# Fill-mask and next-sentence prediction: the pre-training heads


def fill_mask(
    model: Pipeline, text: str, top_k: int = 5, *, max_masks: int = MAX_MASKS
) -> list[Prediction] | list[list[Prediction]]:
    """The top_k tokens for the [MASK] in `text`, best first; one such list per [MASK] if there are several.

    Each [MASK] is predicted on its own (the others stay masked), and, as in transformers' pipeline, the
    `sequence` of a guess keeps [CLS], [SEP] and the other [MASK]s when the text has several.
    """
    head = model.heads.masked_lm
    tokenizer = model.require_tokenizer()
    top_k = _count("top_k", top_k)
    encoding = _encode_whole(model, "fill_mask", text)
    masks = [i for i, id_ in enumerate(encoding.ids) if id_ == tokenizer.mask_token_id]
    if not masks:
        raise ValueError(f"fill_mask needs a {tokenizer.mask_token} token in the text; there is none in {_clip(text)}")
    if len(masks) > _count("max_masks", max_masks):
        raise ValueError(
            f"the text has {len(masks)} {tokenizer.mask_token} tokens, more than max_masks={max_masks}: "
            f"each is predicted on its own, not jointly; pass max_masks= to allow more"
        )
    out = model.forward(np.array(encoding.ids), np.array(encoding.type_ids))
    c = model.config
    logits = masked_lm_logits(out.last_hidden_state[masks], head, c.layer_norm_eps)  # (masks, vocab)
    probs = softmax(logits)
    single = len(masks) == 1
    guesses = [
        [_filled(tokenizer, encoding.ids, mask, int(i), float(p[i]), single) for i in best]
        for mask, p, best in zip(masks, probs, top(probs, top_k))
    ]
    return guesses[0] if single else guesses


def top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores along the last axis, largest first. (..., n) -> (..., min(k, n))"""
    k = min(k, scores.shape[-1])
    best = np.argpartition(scores, -k, axis=-1)[..., -k:]
    order = np.argsort(-np.take_along_axis(scores, best, axis=-1), axis=-1, kind="stable")
    return np.take_along_axis(best, order, axis=-1)


def _filled(tokenizer: Tokenizer, ids: list[int], mask: int, token_id: int, score: float, single: bool) -> Prediction:
    """The guess `token_id` at position `mask`, with the text decoded as transformers' fill-mask pipeline does."""
    filled = [token_id if i == mask else id_ for i, id_ in enumerate(ids)]
    filled = [id_ for id_ in filled if id_ != tokenizer.pad_token_id]
    return Prediction(
        tokenizer.decode([token_id], skip_special_tokens=False),
        token_id,
        score,
        tokenizer.decode(filled, skip_special_tokens=single),
    )


def is_next(model: Pipeline, a: str, b: str) -> float:
    """The probability that `b` follows `a`, by BERT's next-sentence head (class 0 of cls.seq_relationship)."""
    head = model.heads.next_sentence
    encoding = _encode_whole(model, "is_next", a, b)
    out = model.forward(np.array(encoding.ids), np.array(encoding.type_ids), one_token="first")  # reads [CLS] alone
    assert out.pooler_output is not None  # the head requires a pooler
    return float(softmax(classifier_logits(out.pooler_output, head))[0])


# ---------------------------------------------------------------------------------------------
# Sequence classification


def classify(
    model: Pipeline,
    text: str | Sequence[str],
    text_pair: str | Sequence[str] | None = None,
    *,
    top_k: int | None = None,
    function: str | None = None,
    batch_size: int = 32,
) -> list[Label] | list[list[Label]]:
    """The labels of a text (or of each text of a list), best first; top_k of them, or all.

    Scores as transformers' text-classification pipeline: `function` "softmax", "sigmoid" or "none",
    by default chosen from config.json's problem_type (single_label_classification: softmax,
    multi_label_classification: sigmoid, regression: none), else sigmoid for one label and softmax
    for several. Texts longer than the model's positions are truncated.
    """
    readout = model.sequence_logits()
    labels, scored = model.labels, label_scores(model, function)
    if top_k is not None:
        top_k = _count("top_k", top_k)
    single = isinstance(text, str)
    texts = [text] if isinstance(text, str) else text_list(text, name="text")
    if text_pair is not None and single != isinstance(text_pair, str):
        raise TypeError("text and text_pair must both be a str or both lists of str")
    pairs: Sequence[str | None] | None = None
    if text_pair is not None:  # a None in a list of pairs: that text has none
        pairs = [text_pair] if isinstance(text_pair, str) else text_list(text_pair, none_ok=True, name="text_pair")
    results: list = [None] * len(texts)
    for positions, out in batches(model, texts, pairs, batch_size=batch_size, one_token=readout.one_token):
        scores = scored(np.array(readout(out)))  # (batch, labels)
        for i, row in zip(positions, scores):
            ranked = sorted(
                (Label(label, float(s)) for label, s in zip(labels, row)), key=lambda x: x.score, reverse=True
            )
            results[i] = ranked[:top_k]
    return results[0] if single else results


def label_scores(model: Pipeline, function: str | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """What turns a classifier's logits (n, labels) into its scores: `function` ("softmax", "sigmoid" or "none"),
    else the model's choice (score_function)."""
    problem_type = model.heads.head_config.problem_type
    return SCORE_FUNCTIONS[score_function(function, problem_type, len(model.labels))]


def score_function(function: str | None, problem_type: str | None, n_labels: int) -> str:
    """The pipeline's choice of score function (its "default")."""
    if function is not None:
        if function not in SCORE_FUNCTIONS:
            raise ValueError(f"unknown function {function!r}; use one of {', '.join(SCORE_FUNCTIONS)}")
        return function
    if problem_type == "regression":
        return "none"
    if problem_type == "multi_label_classification" or n_labels == 1:
        return "sigmoid"
    return "softmax"


# ---------------------------------------------------------------------------------------------
# Token classification (NER)


class _Token(NamedTuple):
    """A token's probabilities and where it sits in the text, before aggregation (a "pre-entity")."""

    word: str  # the vocabulary entry ("##ing"), or the text itself for [UNK]
    probs: np.ndarray  # (labels,)
    start: int
    end: int
    position: int  # in the encoding
    is_subword: bool


def ner(
    model: Pipeline,
    text: str | Sequence[str],
    *,
    aggregation: str = "simple",
    ignore_labels: Sequence[str] = ("O",),
    stride: int | None = None,
    batch_size: int = 32,
) -> list[Entity] | list[list[Entity]]:
    """The entities of a text (or of each text of a list), as transformers' token-classification pipeline.

    aggregation: "none" (every token, its own label), "simple" (adjacent tokens of one type grouped,
    B- starting a new group), "first" / "average" / "max" (words first take the label of their first
    piece / of their averaged probabilities / of their most confident piece, then are grouped).
    transformers' default is "none". Labels in `ignore_labels` are left out. A text longer than the
    model's positions is truncated, or with `stride` run as windows overlapping by `stride` tokens.
    """
    readout = TokenLogits(model.heads.token_classifier)
    labels = model.labels
    tokenizer = model.require_tokenizer()
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; use one of {', '.join(AGGREGATIONS)}")
    if stride is not None and aggregation == "none":
        raise ValueError(
            "stride runs a long text as windows, whose tokens only an aggregation can reconcile; "
            "choose aggregation 'simple', 'first', 'average' or 'max'"
        )
    single = isinstance(text, str)
    texts = [text] if isinstance(text, str) else text_list(text, name="text")
    limit = _positions(model)
    windows = []  # (text index, encoding)
    for i, t in enumerate(texts):
        first = tokenizer.encode(t, max_length=limit, stride=stride or 0, return_overflowing_tokens=stride is not None)
        windows += [(i, e) for e in [first, *first.overflowing]]
    found: list[list[Entity]] = [[] for _ in windows]  # each window's entities
    for batch in by_length([len(e) for _, e in windows], limit, _count("batch_size", batch_size)):
        rows = [row_of(windows[w][1]) for w in batch]
        logits = readout(model.forward_rows(rows, last_layers=readout.last_layers))  # (length, labels) each
        for w, row_logits in zip(batch, logits):
            i, encoding = windows[w]
            tokens = pre_entities(tokenizer, texts[i], encoding, softmax(row_logits))
            found[w] = [e for e in aggregate(tokens, aggregation, labels, tokenizer) if e.entity not in ignore_labels]
    entities: list[list[Entity]] = [[] for _ in texts]
    for (i, _), e in zip(windows, found):
        entities[i] += e
    counts = collections.Counter(i for i, _ in windows)
    entities = [merge_overlapping(e) if counts[i] > 1 else e for i, e in enumerate(entities)]
    return entities[0] if single else entities


def pre_entities(tokenizer: Tokenizer, text: str, encoding: Encoding, probs: np.ndarray) -> list[_Token]:
    """Each non-special token with its probabilities (seq, labels), span, and whether it continues a word.

    A token continues a word when it is shorter or longer than the text it covers: "##ing" covers "ing".
    """
    tokens = []
    for position, (id_, special, (start, end)) in enumerate(
        zip(encoding.ids, encoding.special_tokens_mask, encoding.offsets)
    ):
        if special:
            continue
        word, written = str(tokenizer.convert_ids_to_tokens(id_)), text[start:end]
        unknown = id_ == tokenizer.unk_token_id
        tokens.append(
            _Token(
                written if unknown else word,
                probs[position],
                start,
                end,
                position,
                not unknown and len(word) != len(written),
            )
        )
    return tokens


def aggregate(tokens: list[_Token], aggregation: str, labels: Sequence[str], tokenizer: Tokenizer) -> list[Entity]:
    """Tokens -> entities: labelled one by one ("none"), grouped ("simple"), or first made words, then grouped."""
    if aggregation in ("none", "simple"):
        entities = [
            Entity(labels[best], float(t.probs[best]), t.word, t.start, t.end, t.position)
            for t in tokens
            for best in [int(t.probs.argmax())]
        ]
        return entities if aggregation == "none" else group_entities(entities, tokenizer)
    words: list[list[_Token]] = []
    for t in tokens:
        if words and t.is_subword:
            words[-1].append(t)
        else:
            words.append([t])
    return group_entities([word_entity(w, aggregation, labels, tokenizer) for w in words], tokenizer)


def word_entity(pieces: list[_Token], aggregation: str, labels: Sequence[str], tokenizer: Tokenizer) -> Entity:
    """One word's label from its pieces: the first piece's ("first"), the most confident piece's ("max"),
    or that of the pieces' mean probabilities ("average")."""
    if aggregation == "first":
        probs = pieces[0].probs
    elif aggregation == "max":
        probs = max(pieces, key=lambda t: t.probs.max()).probs
    else:
        probs = np.nanmean(np.stack([t.probs for t in pieces]), axis=0)
    best = int(probs.argmax())
    return Entity(
        labels[best],
        float(probs[best]),
        tokenizer.convert_tokens_to_string([t.word for t in pieces]),
        pieces[0].start,
        pieces[-1].end,
    )


def bio_tag(label: str) -> tuple[str, str]:
    """("B" or "I", entity type) of a label: "B-PER" -> ("B", "PER"); a label without a prefix counts as "I"."""
    if label.startswith(("B-", "I-")):
        return label[0], label[2:]
    return "I", label


def group_entities(entities: list[Entity], tokenizer: Tokenizer) -> list[Entity]:
    """Adjacent entities of one type become one, unless the next starts with B-; the score is their mean."""
    groups: list[list[Entity]] = []
    for e in entities:
        bi, tag = bio_tag(e.entity)
        if groups and bi != "B" and tag == bio_tag(groups[-1][-1].entity)[1]:
            groups[-1].append(e)
        else:
            groups.append([e])
    return [
        Entity(
            bio_tag(g[0].entity)[1],
            float(np.nanmean([e.score for e in g])),
            tokenizer.convert_tokens_to_string([e.word for e in g]),
            g[0].start,
            g[-1].end,
        )
        for g in groups
    ]


def merge_overlapping(entities: list[Entity]) -> list[Entity]:
    """Entities found in overlapping windows: of those that overlap, the longest (then the surest) stays."""
    kept: list[Entity] = []
    for e in sorted(entities, key=lambda e: e.start):
        if kept and kept[-1].start <= e.start < kept[-1].end:
            longer, as_long = e.end - e.start, kept[-1].end - kept[-1].start
            if longer > as_long or (longer == as_long and e.score > kept[-1].score):
                kept[-1] = e
        else:
            kept.append(e)
    return kept


# ---------------------------------------------------------------------------------------------
# Extractive question answering


def qa(
    model: Pipeline,
    question: str,
    context: str,
    *,
    top_k: int = 1,
    max_answer_len: int = 15,
    max_seq_len: int | None = None,
    doc_stride: int | None = None,
    handle_impossible_answer: bool = False,
    align_to_words: bool = True,
    batch_size: int = 32,
) -> Answer | list[Answer]:
    """The span of `context` that best answers `question`; a list of the top_k best when top_k > 1.

    As transformers 4's question-answering pipeline: `[CLS] question [SEP] context [SEP]` in windows
    of max_seq_len tokens (default 384) overlapping by doc_stride (default 128); in each window,
    softmaxes of the start and end logits over the context tokens (and [CLS]), and the best span
    end >= start of at most max_answer_len tokens by P(start) P(end); with align_to_words, the
    answer widened to whole words. handle_impossible_answer adds the empty answer, scored by [CLS].
    Windows run batch_size at a time, so a context of any length needs bounded memory.
    """
    readout = SpanLogits(model.heads.question_answering)
    tokenizer = model.require_tokenizer()
    for name, value in (("question", question), ("context", context)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        if not value.strip():
            raise ValueError(f"{name} is empty")
    top_k, max_answer_len = _count("top_k", top_k), _count("max_answer_len", max_answer_len)
    positions = _positions(model)
    max_seq_len = min(384, positions) if max_seq_len is None else max_seq_len
    if not 4 <= _count("max_seq_len", max_seq_len) <= positions:
        raise ValueError(f"max_seq_len must lie between 4 and the model's {positions} positions, got {max_seq_len}")
    doc_stride = min(max_seq_len // 2, 128) if doc_stride is None else doc_stride
    if isinstance(doc_stride, bool) or not isinstance(doc_stride, int) or doc_stride < 0:
        raise ValueError(f"doc_stride must be an integer >= 0, got {doc_stride!r}")
    room = max_seq_len - 3 - len(tokenizer.encode(question, add_special_tokens=False, truncation=False))
    if room < 1:
        raise ValueError(
            f"the question is {max_seq_len - 3 - room} tokens long, which leaves no room for the "
            f"context in max_seq_len={max_seq_len} tokens ([CLS] question [SEP] context [SEP]); "
            f"shorten the question" + (" or raise max_seq_len" if max_seq_len < positions else "")
        )
    context_length = len(tokenizer.encode(context, add_special_tokens=False, truncation=False))
    if context_length > room and not 0 <= doc_stride < room:
        raise ValueError(
            f"the context must run as windows of {room} tokens (max_seq_len={max_seq_len} less the "
            f"question and 3 special tokens), which doc_stride={doc_stride} must be smaller than; "
            f"shorten the question or lower doc_stride"
        )
    first = tokenizer.encode(
        question,
        context,
        max_length=max_seq_len,
        truncation="only_second",
        stride=doc_stride,
        return_overflowing_tokens=True,
    )
    windows = [first, *first.overflowing]
    logits: list[np.ndarray] = []  # (length, 2) start and end logits per window
    for b in range(0, len(windows), _count("batch_size", batch_size)):
        rows = [row_of(e) for e in windows[b : b + batch_size]]
        logits += readout(model.forward_rows(rows, last_layers=readout.last_layers))
    answers, null_score = [], 1.0
    for encoding, span in zip(windows, logits):
        p_start, p_end = answer_probabilities(encoding, span[:, 0], span[:, 1], tokenizer)
        null_score = min(null_score, float(p_start[0] * p_end[0]))
        context_tokens = np.flatnonzero([s == 1 for s in encoding.sequence_ids])
        for s, e, score in best_spans(p_start, p_end, context_tokens, top_k, max_answer_len):
            begin, stop = char_span(encoding, s, e, align_to_words)
            answers.append(Answer(context[begin:stop], score, begin, stop))
    if handle_impossible_answer:
        answers.append(Answer("", null_score, 0, 0))
    answers = sorted(answers, key=lambda a: a.score, reverse=True)[:top_k]
    return answers[0] if top_k == 1 else answers


def answer_probabilities(
    encoding: Encoding, start: np.ndarray, end: np.ndarray, tokenizer: Tokenizer
) -> tuple[np.ndarray, np.ndarray]:
    """P(start), P(end) per token of one window (seq,): softmaxes over the context tokens and [CLS]
    (which stands for "no answer"), every other token's logit set to -10000 as the pipeline does."""
    allowed = np.array([s == 1 or id_ == tokenizer.cls_token_id for s, id_ in zip(encoding.sequence_ids, encoding.ids)])
    return (softmax(np.where(allowed, start, np.float32(-10000))), softmax(np.where(allowed, end, np.float32(-10000))))


def best_spans(
    p_start: np.ndarray, p_end: np.ndarray, context: np.ndarray, k: int, max_len: int
) -> list[tuple[int, int, float]]:
    """The k best (start, end, P(start) P(end)) token spans with start <= end < start + max_len, inside
    `context` (the window's context token positions, consecutive)."""
    scores = np.outer(p_start[context], p_end[context])  # (n, n): [i, j] = P(start at i) P(end at j)
    n = len(context)
    allowed = np.triu(np.tril(np.ones((n, n), bool), max_len - 1))
    flat = np.where(allowed, scores, -1).ravel()
    best = [i for i in np.argsort(-flat, kind="stable")[:k] if flat[i] >= 0]
    return [(int(context[i // n]), int(context[i % n]), float(flat[i])) for i in best]


def char_span(encoding: Encoding, start: int, end: int, align_to_words: bool) -> tuple[int, int]:
    """The characters of the context tokens start..end; with align_to_words, of the whole words they are in."""
    if align_to_words:
        in_context = [i for i, s in enumerate(encoding.sequence_ids) if s == 1]
        start = next(i for i in in_context if encoding.word_ids[i] == encoding.word_ids[start])
        end = max(i for i in in_context if encoding.word_ids[i] == encoding.word_ids[end])
    return encoding.offsets[start][0], encoding.offsets[end][1]


# ---------------------------------------------------------------------------------------------
# Checks shared by the tasks


def _positions(model: Pipeline) -> int:
    """Tokens per input the model reads: its positions, or the tokenizer's model_max_length if smaller."""
    positions = model.config.max_tokens
    return min(positions, model.require_tokenizer().model_max_length or positions)


def _encode_whole(model: Pipeline, task: str, *texts: str) -> Encoding:
    """One text or a pair, encoded without truncation; a clear error if not str or too long for the model."""
    for value in texts:
        if not isinstance(value, str):
            raise TypeError(f"{task} takes text as a str, not {type(value).__name__}")
    encoding = model.require_tokenizer().encode(*texts, truncation=False)
    if len(encoding) > _positions(model):
        raise ValueError(
            f"the text is {len(encoding)} tokens long; this model reads at most {_positions(model)} "
            f"and {task} does not truncate: shorten the text"
        )
    return encoding


def _count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _clip(text: str, width: int = 60) -> str:
    return repr(text if len(text) <= width else text[:width] + "...")
