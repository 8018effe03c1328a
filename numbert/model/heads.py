"""The heads BERT checkpoints carry on top of the encoder: a few lines of NumPy each.

Pre-training (section 3.1 of the BERT paper) put two heads on the encoder, and the published
bert-base-uncased still carries both:

- the masked-LM head (`cls.predictions.*`) turns each token's last hidden state into scores over
  the vocabulary, in three lines:

      x = activation(h W_t^T + b_t)        # transform.dense, then config hidden_act (GELU)
      x = LayerNorm(x)                     # transform.LayerNorm
      logits = x E^T + b                   # decoder: the word-embedding matrix E, tied, plus a bias

- next-sentence prediction (`cls.seq_relationship.*`) is a 2-way linear layer on the pooler output;
  class 0 is "B follows A".

Fine-tuning (section 4) adds a single linear layer: `classifier` on the pooler output (sequence
classification) or on every token (token classification), `qa_outputs` on every token (two
outputs: the logits of the answer starting and ending there).

BERT's relatives carry the same heads under their own names (numbert.model.tensors.RENAMES turns their masked-LM
heads into `cls.predictions.*`), with two differences: their masked-LM transform uses GELU whatever their
hidden_act (DistilBERT's: its activation), and their sequence classifier brings its own dense layer on the
first token instead of the pooler (SEQUENCE_HEADS): RoBERTa's dense + tanh + out_proj, ELECTRA's with GELU,
DistilBERT's pre_classifier + ReLU + classifier.

The modern family: NomicBERT's and GTE's heads are BERT's (NomicBERT's transform uses its hidden_act, SiLU);
jina-embeddings-v3's are RoBERTa's. ModernBERT has one prediction head, `head` (dense without bias, its
classifier_activation, a LayerNorm without shift), under both its masked LM (then `decoder`, tied) and its
sequence classifier, which reads [CLS] or the mean of the tokens (classifier_pooling), then `classifier`.

Weights are by bare `BertModel` names as numbert.checkpoint.weights.load_weights returns them. `Heads`
builds each head from them when a task first asks for it, so a checkpoint without a head still
loads, and the task that needs the head fails naming the tensors it lacks.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .config import BertConfig
from .layers import ACTIVATIONS, Linear, Norm, exp_shifted, layer_norm, linear, matmul_weight, row_sums
from .pooling import masked_mean, pool

f32 = np.float32
log = logging.getLogger(__name__)  # once per head: its weights are not finite (`Heads.sequence_classifier`)

PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")


def pre_training_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """The tensors of BERT's two pre-training heads, as transformers names them, with their shapes.

    The masked-LM decoder's weight is absent: it is the word-embedding matrix (unless untied). ELECTRA's
    transform narrows hidden_size to its embedding_size.
    """
    h, e, vocab = config.hidden_size, config.embedding_width, config.vocab_size
    return {
        "cls.predictions.transform.dense.weight": (e, h),
        "cls.predictions.transform.dense.bias": (e,),
        "cls.predictions.transform.LayerNorm.weight": (e,),
        "cls.predictions.transform.LayerNorm.bias": (e,),
        "cls.predictions.bias": (vocab,),
        "cls.seq_relationship.weight": (2, h),
        "cls.seq_relationship.bias": (2,),
    }


class MaskedLM(NamedTuple):
    """The masked-LM head's weights."""

    transform: Linear  # (hidden, hidden)
    norm: Norm  # (hidden,)
    decoder: np.ndarray  # (vocab, hidden): the word embeddings themselves, unless the checkpoint unties them
    bias: np.ndarray | None  # (vocab,); None where the checkpoint has none (ModernBERT with decoder_bias false)
    activation: str = "gelu"  # the transform's: BERT's, DistilBERT's and NomicBERT's hidden_act, GELU for the others


class SequenceClassifier(NamedTuple):
    """A sequence classifier's weights: `out` on BERT's pooler output, or on activation(dense(h_first)) for
    a relative, whose head brings its own dense layer (SEQUENCE_HEADS)."""

    out: Linear  # (labels, hidden)
    dense: Linear | None = None  # (hidden, hidden); None: BERT's, on the pooler output the encoder computes
    activation: str = "tanh"
    norm: Norm | None = None  # ModernBERT: its prediction head's LayerNorm after the activation,
    eps: float = 1e-5  # with its epsilon (norm_eps)
    pooling: str = "first"  # what the head reads: the first token, (ModernBERT) "mean" of the tokens, or "last"
    # (a decoder's score, on the last real token's final-normed state, no dense layer: Qwen3's rerankers)


# model_type -> the names of its sequence classifier's dense layer, its activation and its output layer
SEQUENCE_HEADS = {
    "roberta": ("classifier.dense", "tanh", "classifier.out_proj"),  # RobertaClassificationHead
    "xlm-roberta": ("classifier.dense", "tanh", "classifier.out_proj"),
    "mpnet": ("classifier.dense", "tanh", "classifier.out_proj"),  # MPNetClassificationHead
    "electra": ("classifier.dense", "gelu", "classifier.out_proj"),  # ElectraClassificationHead
    "distilbert": ("pre_classifier", "relu", "classifier"),  # DistilBertForSequenceClassification
    "jina_embeddings_v3": ("classifier.dense", "tanh", "classifier.out_proj"),  # as XLM-R's
}
MODERNBERT_HEAD = ("head.dense", "head.norm")  # ModernBertPredictionHead, under its masked LM and classifiers
SCORE = "score.weight"  # a decoder's sequence classifier (Qwen3ForSequenceClassification), (labels, hidden)
HEAD_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"tanh": np.tanh, **ACTIVATIONS}


# ---------------------------------------------------------------------------------------------
# The maths


def masked_lm_logits(h: np.ndarray, head: MaskedLM, eps: float) -> np.ndarray:
    """Scores over the vocabulary for each token. (..., hidden) -> (..., vocab)

    Only the positions asked about need this: for fill-mask, the [MASK]s' hidden states.
    """
    x = ACTIVATIONS[head.activation](linear(h, head.transform))
    x = layer_norm(x, head.norm, eps)
    logits = matmul_weight(x, head.decoder)
    if head.bias is not None:
        logits += head.bias
    return logits


def splade_weights(logits: np.ndarray, activation: str = "relu") -> np.ndarray:
    """SPLADE's term weights of masked-LM logits, in place: log(1 + relu(x)); activation "log1p_relu" takes
    log(1 + .) once more (sentence-transformers' SpladePooling). (..., vocab) -> (..., vocab), all >= 0"""
    np.maximum(logits, 0, out=logits)
    np.log1p(logits, out=logits)
    if activation == "log1p_relu":
        np.log1p(logits, out=logits)
    return logits


def softmax(x: np.ndarray) -> np.ndarray:
    """exp(x_i) / sum_j exp(x_j) over the last axis, into a new float32 array. (..., n) -> (..., n)"""
    e = exp_shifted(np.array(x, dtype=f32))
    e /= row_sums(e)
    return e


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), elementwise, float32; as exp(-log(1 + exp(-x))), which cannot overflow (NaN stays NaN)."""
    with np.errstate(invalid="ignore"):
        return np.exp(-np.logaddexp(f32(0), -np.asarray(x, dtype=f32)))


def classifier_logits(x: np.ndarray, head: Linear) -> np.ndarray:
    """A fine-tuning head: one linear layer. (..., hidden) -> (..., labels)

    Sequence classification and next-sentence prediction apply it to the pooler output (batch, hidden),
    token classification to every token (batch, seq, hidden), question answering too, with two
    "labels": start and end.
    """
    return linear(x, head)


def sequence_logits(first_token: np.ndarray, pooled: np.ndarray | None, head: SequenceClassifier) -> np.ndarray:
    """A sequence classifier's logits. first_token: the last layer's [CLS] (<s>) states, (batch, hidden), or
    for a head pooling "mean" (ModernBERT) the mean of each row's tokens (`sequence_input`); pooled: BERT's pooler
    output (batch, hidden), read when the head has no dense layer of its own. -> (batch, labels)"""
    if head.dense is None and head.pooling == "last":  # a decoder's score row(s) on the last real token
        return classifier_logits(first_token, head.out)
    if head.dense is None:
        assert pooled is not None  # Heads.sequence_classifier requires a pooler for BERT's head
        return classifier_logits(pooled, head.out)
    x = HEAD_ACTIVATIONS[head.activation](linear(first_token, head.dense))
    if head.norm is not None:  # ModernBERT's prediction head
        x = layer_norm(x, head.norm, head.eps)
    return classifier_logits(x, head.out)


def sequence_input(last_hidden_state: np.ndarray, attention_mask: np.ndarray, head: SequenceClassifier) -> np.ndarray:
    """What a sequence classifier's dense layer reads: each row's first token, the mean of its tokens for a head
    pooling "mean" (ModernBERT's classifier_pooling), its last real token for "last" (either padding side).
    (batch, seq, hidden) -> (batch, hidden)"""
    if head.pooling == "mean":
        return masked_mean(last_hidden_state, attention_mask)
    if head.pooling == "last":
        return pool(last_hidden_state, attention_mask, "sep")
    return last_hidden_state[:, 0]


# ---------------------------------------------------------------------------------------------
# What config.json says about the heads


@dataclass(frozen=True)
class HeadConfig:
    """The fields of config.json the heads need besides the encoder's (numbert.model.config.BertConfig)."""

    architectures: tuple[str, ...] = ()
    id2label: tuple[tuple[int, str], ...] | None = None  # sorted (id, label) pairs; None: LABEL_0, LABEL_1, ...
    problem_type: str | None = None  # one of PROBLEM_TYPES, or None: decided by the number of labels
    tie_word_embeddings: bool = True  # the MLM decoder is the word-embedding matrix
    activation_fn: str | None = None  # a cross-encoder's score activation (a dotted torch path), if it names one
    # ModernBERT's prediction head: what its classifier reads ("cls" or "mean"), its activation, its dense layer's
    # bias and its decoder's
    classifier_pooling: str = "cls"
    classifier_activation: str = "gelu"
    classifier_bias: bool = False
    decoder_bias: bool = True

    @classmethod
    def from_dict(cls, d: Mapping, source: str = "config") -> HeadConfig:
        architectures = d.get("architectures") or ()
        if not isinstance(architectures, (list, tuple)) or not all(isinstance(a, str) for a in architectures):
            raise ValueError(f"{source}: architectures must be a list of names, got {architectures!r}")
        problem_type = d.get("problem_type")
        if problem_type is not None and problem_type not in PROBLEM_TYPES:
            raise ValueError(
                f"{source}: unknown problem_type {problem_type!r}; expected one of {', '.join(PROBLEM_TYPES)}"
            )
        id2label = d.get("id2label")
        if id2label is not None:
            try:
                id2label = tuple(sorted((int(k), str(v)) for k, v in dict(id2label).items()))
            except (TypeError, ValueError):
                raise ValueError(f"{source}: id2label must map label ids to names, got {id2label!r}") from None
            if [i for i, _ in id2label] != list(range(len(id2label))):
                raise ValueError(
                    f"{source}: id2label must number its labels 0, 1, 2, ...; got ids {[i for i, _ in id2label]}"
                )
        tie = d.get("tie_word_embeddings", True)
        if tie is not None and not isinstance(tie, bool):
            raise ValueError(f"{source}: tie_word_embeddings must be true or false, got {tie!r}")
        saved_by = d.get("sentence_transformers")  # a CrossEncoder's own fields (sentence-transformers >= 4)
        activation = saved_by.get("activation_fn") if isinstance(saved_by, dict) else None
        activation = d.get("sbert_ce_default_activation_function") if activation is None else activation
        if activation is not None and not isinstance(activation, str):
            raise ValueError(f"{source}: a cross-encoder's activation_fn must be a dotted path, got {activation!r}")
        pooling, head_activation = d.get("classifier_pooling", "cls"), d.get("classifier_activation", "gelu")
        if pooling not in ("cls", "mean"):
            raise ValueError(f"{source}: classifier_pooling must be 'cls' or 'mean', got {pooling!r}")
        if head_activation not in HEAD_ACTIVATIONS:
            runs = ", ".join(HEAD_ACTIVATIONS)
            raise ValueError(f"{source}: unsupported classifier_activation {head_activation!r}; numbert runs {runs}")
        flags = {}
        for key, default in (("classifier_bias", False), ("decoder_bias", True)):
            flags[key] = d.get(key, default)
            if not isinstance(flags[key], bool):
                raise ValueError(f"{source}: {key} must be true or false, got {flags[key]!r}")
        return cls(
            tuple(architectures),
            id2label,
            problem_type,
            tie is not False,
            activation,
            pooling,
            head_activation,
            flags["classifier_bias"],
            flags["decoder_bias"],
        )

    @property
    def architecture(self) -> str | None:
        """The first architecture config.json names, or None."""
        return self.architectures[0] if self.architectures else None


# ---------------------------------------------------------------------------------------------
# Building the heads from a checkpoint's tensors


class Heads:
    """The task heads of one checkpoint, each built and checked the first time a task asks for it.

    `weights`: the checkpoint's tensors by bare names (numbert.checkpoint.weights.load_weights); `source`
    names the model in error messages.
    """

    def __init__(
        self,
        weights: Mapping[str, np.ndarray],
        config: BertConfig,
        head_config: HeadConfig | None = None,
        source: str = "model",
    ):
        self.weights, self.config, self.source = weights, config, source
        self.head_config = head_config or HeadConfig()

    def available(self) -> list[str]:
        """The heads whose tensors the checkpoint holds (some maybe incomplete): 'masked_lm', 'next_sentence',
        'classifier' (sequence or token classification, as config.json's architectures says) and
        'question_answering'."""
        prefixes = {
            "masked_lm": "cls.predictions.",
            "next_sentence": "cls.seq_relationship.",
            "classifier": "classifier.",
            "question_answering": "qa_outputs.",
        }
        return [head for head, prefix in prefixes.items() if any(name.startswith(prefix) for name in self.weights)]

    @functools.cached_property
    def masked_lm(self) -> MaskedLM:
        """The masked-LM head of BertForMaskedLM / BertForPreTraining checkpoints (bert-base-uncased has one)."""
        if self.config.model_type == "modernbert":
            return self._modernbert_masked_lm()
        e, vocab = self.config.embedding_width, self.config.vocab_size
        shapes = {
            name: shape
            for name, shape in pre_training_shapes(self.config).items()
            if name.startswith("cls.predictions.")
        }
        if not self.head_config.tie_word_embeddings:
            shapes["cls.predictions.decoder.weight"] = (vocab, e)
        # transformers saves the bias as cls.predictions.bias, older checkpoints also (or only) as decoder.bias
        bias_name = "cls.predictions.bias"
        if bias_name not in self.weights and "cls.predictions.decoder.bias" in self.weights:
            bias_name = "cls.predictions.decoder.bias"
            shapes[bias_name] = shapes.pop("cls.predictions.bias")
        w = self._take(
            "masked-LM head",
            shapes,
            "fill_mask and embed_sparse need a checkpoint saved from BertForMaskedLM or BertForPreTraining "
            "(such as bert-base-uncased), or a SparseEncoder (SPLADE) directory"
            if self.config.model_type == "bert"
            else f"fill_mask and embed_sparse need a checkpoint saved from {self._architecture('ForMaskedLM')}",
        )
        decoder = (
            w["cls.predictions.decoder.weight"]
            if not self.head_config.tie_word_embeddings
            else self.weights["embeddings.word_embeddings.weight"]
        )
        own_activation = self.config.model_type in ("bert", "distilbert", "nomic_bert")  # the others' heads use GELU
        return MaskedLM(
            transform=Linear(w["cls.predictions.transform.dense.weight"], w["cls.predictions.transform.dense.bias"]),
            norm=Norm(w["cls.predictions.transform.LayerNorm.weight"], w["cls.predictions.transform.LayerNorm.bias"]),
            decoder=decoder,
            bias=w[bias_name],
            activation=self.config.hidden_act if own_activation else "gelu",
        )

    @functools.cached_property
    def next_sentence(self) -> Linear:
        """The next-sentence head (2, hidden) of BertForPreTraining / BertForNextSentencePrediction checkpoints."""
        w = self._take(
            "next-sentence head",
            {
                name: shape
                for name, shape in pre_training_shapes(self.config).items()
                if name.startswith("cls.seq_relationship.")
            },
            "is_next needs a checkpoint saved from BertForPreTraining or BertForNextSentencePrediction, "
            "such as bert-base-uncased",
        )
        self._require_pooler("next-sentence prediction")
        return Linear(w["cls.seq_relationship.weight"], w["cls.seq_relationship.bias"])

    def _modernbert_masked_lm(self) -> MaskedLM:
        """ModernBertForMaskedLM's head: `head` (dense, activation, norm), then the decoder, tied, with its bias."""
        h, vocab, hc = self.config.hidden_size, self.config.vocab_size, self.head_config
        shapes = self._modernbert_head_shapes()
        if not hc.tie_word_embeddings:
            shapes["cls.predictions.decoder.weight"] = (vocab, h)
        if hc.decoder_bias:
            shapes["cls.predictions.bias"] = (vocab,)
        w = self._take(
            "masked-LM head", shapes, "fill_mask and embed_sparse need a checkpoint saved from ModernBertForMaskedLM"
        )
        dense, norm = self._modernbert_head(w)
        decoder = w.get("cls.predictions.decoder.weight", self.weights["embeddings.word_embeddings.weight"])
        return MaskedLM(dense, norm, decoder, w.get("cls.predictions.bias"), hc.classifier_activation)

    def _modernbert_head_shapes(self) -> dict[str, tuple[int, ...]]:
        h, (dense, norm) = self.config.hidden_size, MODERNBERT_HEAD
        shapes = {f"{dense}.weight": (h, h), f"{norm}.weight": (h,)}
        if self.head_config.classifier_bias:
            shapes[f"{dense}.bias"] = (h,)
        if "norm" in self.config.biases:
            shapes[f"{norm}.bias"] = (h,)
        return shapes

    def _modernbert_head(self, w: Mapping[str, np.ndarray]) -> tuple[Linear, Norm]:
        dense, norm = MODERNBERT_HEAD
        return Linear(w[f"{dense}.weight"], w.get(f"{dense}.bias")), Norm(w[f"{norm}.weight"], w.get(f"{norm}.bias"))

    @functools.cached_property
    def sequence_classifier(self) -> SequenceClassifier:
        """The sequence classifier (`built_sequence_classifier`), after one warning line if its output layer holds
        NaN or infinity: every score would be NaN (the encoder's own states are checked at each forward; a head's
        few numbers are checked once, here)."""
        head = self.built_sequence_classifier()
        out = head.out
        finite = np.isfinite(out.weight).all() and (out.bias is None or np.isfinite(out.bias).all())
        if not finite:
            log.warning(
                "numbert: model %r's sequence classifier holds NaN or infinite weights: every score will be NaN; "
                "load it with check_finite=True to name the tensor",
                self.source,
            )
        return head

    def built_sequence_classifier(self) -> SequenceClassifier:
        """The classifier of BertForSequenceClassification checkpoints, (labels, hidden) on the pooler output;
        a family member's (RobertaForSequenceClassification, ...) with its own dense layer on the first token;
        ModernBERT's on its prediction head over [CLS] or the tokens' mean."""
        if self.config.model_type == "modernbert":
            head = self._classifier("ForSequenceClassification", "ForTokenClassification", "ner")
            w = self._take(
                "ModernBertForSequenceClassification head",
                self._modernbert_head_shapes(),
                "classify needs a ModernBertForSequenceClassification",
            )
            transform, norm = self._modernbert_head(w)
            pooling = "mean" if self.head_config.classifier_pooling == "mean" else "first"
            activation, eps = self.head_config.classifier_activation, self.config.layer_norm_eps
            return SequenceClassifier(head, transform, activation, norm, eps, pooling)
        if self.config.member.decoder is not None:
            return self._decoder_score()
        if self.config.model_type not in SEQUENCE_HEADS:
            head = self._classifier("ForSequenceClassification", "ForTokenClassification", "ner")
            self._require_pooler("sequence classification")
            return SequenceClassifier(head)
        dense, activation, out = SEQUENCE_HEADS[self.config.model_type]
        head = self._classifier("ForSequenceClassification", "ForTokenClassification", "ner", out)
        h, architecture = self.config.hidden_size, self._architecture("ForSequenceClassification")
        w = self._take(f"{architecture} classifier", _linear(dense, h, h), f"classify needs a {architecture}")
        return SequenceClassifier(head, Linear(w[dense + ".weight"], w[dense + ".bias"]), activation)

    def _decoder_score(self) -> SequenceClassifier:
        """A decoder's score (labels, hidden), no bias, on the last real token: Qwen3ForSequenceClassification's
        score.weight, or the one row the loader made of a Qwen3ForCausalLM reranker's "yes" and "no" rows."""
        architecture = self._architecture("ForSequenceClassification")
        rows = len(self.weights[SCORE]) if SCORE in self.weights else 1
        w = self._take(
            "sequence classifier (score)",
            {SCORE: (rows, self.config.hidden_size)},
            f"predict, rerank and classify need a {architecture}, or a {self._architecture('ForCausalLM')} "
            f"reranker (Qwen3-Reranker: its 'yes' and 'no' tokens)",
        )
        if len(self.labels) != rows:
            raise ValueError(
                f"{self.source}: config.json's id2label names {len(self.labels)} labels but the score has {rows} rows"
            )
        return SequenceClassifier(Linear(w[SCORE], None), pooling="last")

    @functools.cached_property
    def token_classifier(self) -> Linear:
        """The classifier (labels, hidden) on every token of BertForTokenClassification checkpoints."""
        self._refuse_modernbert_token_head("ForTokenClassification")
        return self._classifier("ForTokenClassification", "ForSequenceClassification", "classify")

    @functools.cached_property
    def question_answering(self) -> Linear:
        """The span head (2, hidden) of BertForQuestionAnswering checkpoints: start and end logits per token."""
        self._refuse_modernbert_token_head("ForQuestionAnswering")
        h = self.config.hidden_size
        w = self._take(
            "question-answering head",
            {"qa_outputs.weight": (2, h), "qa_outputs.bias": (2,)},
            f"qa needs a checkpoint saved from {self._architecture('ForQuestionAnswering')}",
        )
        return Linear(w["qa_outputs.weight"], w["qa_outputs.bias"])

    @property
    def labels(self) -> list[str]:
        """The classifier's label names: config.json's id2label, else LABEL_0, LABEL_1, ... (transformers' names)."""
        outputs = [name for name in ("classifier.weight", "classifier.out_proj.weight", SCORE) if name in self.weights]
        rows = len(self.weights[outputs[0]]) if outputs else 2
        causal = (self.head_config.architecture or "").endswith("ForCausalLM")  # a reranker: its score, one label
        if self.head_config.id2label is None or causal:
            return [f"LABEL_{i}" for i in range(rows)]
        return [label for _, label in self.head_config.id2label]

    def _refuse_modernbert_token_head(self, task: str) -> None:
        """ModernBERT's token heads run its prediction head first: not built, so refused rather than misread."""
        if self.config.model_type == "modernbert":
            raise ValueError(
                f"{self.source}: ModernBert{task}'s head (its prediction head on every token, then the classifier) "
                f"is not built; numbert runs ModernBERT's masked LM and sequence classifier"
            )

    def _architecture(self, task: str) -> str:
        """This model's architecture for `task`: BertForTokenClassification, RobertaForSequenceClassification..."""
        return self.config.member.name + task

    def _classifier(self, task: str, other_task: str, other_method: str, name: str = "classifier") -> Linear:
        """The `name` tensors (labels, hidden), checked against id2label, for a head of `task`
        (ForSequenceClassification, ...), not of `other_task`."""
        architecture, other = self._architecture(task), self._architecture(other_task)
        declared = self.head_config.architecture
        if declared == other:
            raise ValueError(
                f"{self.source}: its classifier belongs to a {other} (config.json's architectures); "
                f"use {other_method} instead"
            )
        if declared is not None and declared.startswith(self.config.member.name + "For") and declared != architecture:
            raise ValueError(
                f"{self.source}: config.json's architectures is {declared}; this task needs a "
                f"checkpoint saved from {architecture}"
            )
        h = self.config.hidden_size
        rows = self.weights[name + ".weight"].shape[0] if name + ".weight" in self.weights else len(self.labels)
        w = self._take(
            f"{architecture} classifier",
            _linear(name, rows, h),
            f"this task needs a checkpoint saved from {architecture}",
        )
        if len(self.labels) != rows:
            raise ValueError(
                f"{self.source}: config.json's id2label names {len(self.labels)} labels but the "
                f"classifier has {rows} outputs"
            )
        return Linear(w[name + ".weight"], w[name + ".bias"])

    def _take(self, what: str, shapes: dict[str, tuple[int, ...]], hint: str) -> dict[str, np.ndarray]:
        """The tensors `shapes` names, checked; a clear error naming every missing or misshapen one."""
        missing = [name for name in shapes if name not in self.weights]
        if missing:
            present = f"; it has {', '.join(self.available())}" if self.available() else ""
            architecture = self.head_config.architecture or "none given"
            raise ValueError(
                f"{self.source} has no {what}: its checkpoint lacks tensor"
                f"{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} "
                f"(config.json's architectures: {architecture}{present}); {hint}"
            )
        for name, shape in shapes.items():
            if self.weights[name].shape != shape:
                raise ValueError(
                    f"{self.source}: tensor {name!r} has shape {self.weights[name].shape}, "
                    f"expected {shape} from config.json"
                )
        return {name: self.weights[name] for name in shapes}

    def _require_pooler(self, task: str) -> None:  # BERT's heads on the pooler
        if "pooler.dense.weight" not in self.weights:
            raise ValueError(f"{self.source} has no pooler (pooler.dense.*), which {task} runs on")


def _linear(name: str, rows: int, columns: int) -> dict[str, tuple[int, ...]]:
    """The shapes of a Linear layer's tensors by name: weight (rows, columns), bias (rows,)."""
    return {f"{name}.weight": (rows, columns), f"{name}.bias": (rows,)}
