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

Weights are by bare `BertModel` names as numbert.checkpoint.load_weights returns them. `Heads`
builds each head from them when a task first asks for it, so a checkpoint without a head still
loads, and the task that needs the head fails naming the tensors it lacks.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .config import BertConfig
from .layers import ACTIVATIONS, Linear, Norm, exp_shifted, layer_norm, linear, matmul_weight, row_sums

f32 = np.float32

PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")


def pre_training_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """The tensors of BERT's two pre-training heads, as transformers names them, with their shapes.

    The masked-LM decoder's weight is absent: it is the word-embedding matrix (unless untied).
    """
    h, vocab = config.hidden_size, config.vocab_size
    return {
        "cls.predictions.transform.dense.weight": (h, h),
        "cls.predictions.transform.dense.bias": (h,),
        "cls.predictions.transform.LayerNorm.weight": (h,),
        "cls.predictions.transform.LayerNorm.bias": (h,),
        "cls.predictions.bias": (vocab,),
        "cls.seq_relationship.weight": (2, h),
        "cls.seq_relationship.bias": (2,),
    }


class MaskedLM(NamedTuple):
    """The masked-LM head's weights."""

    transform: Linear  # (hidden, hidden)
    norm: Norm  # (hidden,)
    decoder: np.ndarray  # (vocab, hidden): the word embeddings themselves, unless the checkpoint unties them
    bias: np.ndarray  # (vocab,)


# ---------------------------------------------------------------------------------------------
# The maths


def masked_lm_logits(h: np.ndarray, head: MaskedLM, hidden_act: str, eps: float) -> np.ndarray:
    """Scores over the vocabulary for each token. (..., hidden) -> (..., vocab)

    Only the positions asked about need this: for fill-mask, the [MASK]s' hidden states.
    """
    x = ACTIVATIONS[hidden_act](linear(h, head.transform))
    x = layer_norm(x, head.norm, eps)
    logits = matmul_weight(x, head.decoder)
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
    """1 / (1 + exp(-x)), elementwise, float32; as exp(-log(1 + exp(-x))), which cannot overflow."""
    return np.exp(-np.logaddexp(f32(0), -np.asarray(x, dtype=f32)))


def classifier_logits(x: np.ndarray, head: Linear) -> np.ndarray:
    """A fine-tuning head: one linear layer. (..., hidden) -> (..., labels)

    Sequence classification and next-sentence prediction apply it to the pooler output (batch, hidden),
    token classification to every token (batch, seq, hidden), question answering too, with two
    "labels": start and end.
    """
    return linear(x, head)


def span_logits(last_hidden_state: np.ndarray, head: Linear) -> tuple[np.ndarray, np.ndarray]:
    """The QA head: the logits of the answer starting and ending at each token.

    (..., seq, hidden) -> start (..., seq), end (..., seq)
    """
    logits = linear(last_hidden_state, head)
    return logits[..., 0], logits[..., 1]


# ---------------------------------------------------------------------------------------------
# What config.json says about the heads


@dataclass(frozen=True)
class HeadConfig:
    """The fields of config.json the heads need besides the encoder's (numbert.config.BertConfig)."""

    architectures: tuple[str, ...] = ()
    id2label: tuple[tuple[int, str], ...] | None = None  # sorted (id, label) pairs; None: LABEL_0, LABEL_1, ...
    problem_type: str | None = None  # one of PROBLEM_TYPES, or None: decided by the number of labels
    tie_word_embeddings: bool = True  # the MLM decoder is the word-embedding matrix
    activation_fn: str | None = None  # a cross-encoder's score activation (a dotted torch path), if it names one

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
        return cls(tuple(architectures), id2label, problem_type, tie is not False, activation)

    @classmethod
    def from_json(cls, path: str | Path) -> HeadConfig:
        """The head fields of a checkpoint's config.json (which BertConfig.from_json has already read and checked)."""
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls.from_dict(d if isinstance(d, dict) else {}, source=str(path))

    @property
    def architecture(self) -> str | None:
        """The first architecture config.json names, or None."""
        return self.architectures[0] if self.architectures else None


# ---------------------------------------------------------------------------------------------
# Building the heads from a checkpoint's tensors


class Heads:
    """The task heads of one checkpoint, each built and checked the first time a task asks for it.

    `weights`: the checkpoint's tensors by bare names (numbert.checkpoint.load_weights); `source`
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
        h, vocab = self.config.hidden_size, self.config.vocab_size
        shapes = {
            name: shape
            for name, shape in pre_training_shapes(self.config).items()
            if name.startswith("cls.predictions.")
        }
        if not self.head_config.tie_word_embeddings:
            shapes["cls.predictions.decoder.weight"] = (vocab, h)
        # transformers saves the bias as cls.predictions.bias, older checkpoints also (or only) as decoder.bias
        bias_name = "cls.predictions.bias"
        if bias_name not in self.weights and "cls.predictions.decoder.bias" in self.weights:
            bias_name = "cls.predictions.decoder.bias"
            shapes[bias_name] = shapes.pop("cls.predictions.bias")
        w = self._take(
            "masked-LM head",
            shapes,
            "fill_mask and embed_sparse need a checkpoint saved from BertForMaskedLM or BertForPreTraining "
            "(such as bert-base-uncased), or a SparseEncoder (SPLADE) directory",
        )
        decoder = (
            w["cls.predictions.decoder.weight"]
            if not self.head_config.tie_word_embeddings
            else self.weights["embeddings.word_embeddings.weight"]
        )
        return MaskedLM(
            transform=Linear(w["cls.predictions.transform.dense.weight"], w["cls.predictions.transform.dense.bias"]),
            norm=Norm(w["cls.predictions.transform.LayerNorm.weight"], w["cls.predictions.transform.LayerNorm.bias"]),
            decoder=decoder,
            bias=w[bias_name],
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

    @functools.cached_property
    def sequence_classifier(self) -> Linear:
        """The classifier (labels, hidden) on the pooler output of BertForSequenceClassification checkpoints."""
        head = self._classifier("BertForSequenceClassification", "BertForTokenClassification", "ner")
        self._require_pooler("sequence classification")
        return head

    @functools.cached_property
    def token_classifier(self) -> Linear:
        """The classifier (labels, hidden) on every token of BertForTokenClassification checkpoints."""
        return self._classifier("BertForTokenClassification", "BertForSequenceClassification", "classify")

    @functools.cached_property
    def question_answering(self) -> Linear:
        """The span head (2, hidden) of BertForQuestionAnswering checkpoints: start and end logits per token."""
        h = self.config.hidden_size
        w = self._take(
            "question-answering head",
            {"qa_outputs.weight": (2, h), "qa_outputs.bias": (2,)},
            "qa needs a checkpoint saved from BertForQuestionAnswering",
        )
        return Linear(w["qa_outputs.weight"], w["qa_outputs.bias"])

    @property
    def labels(self) -> list[str]:
        """The classifier's label names: config.json's id2label, else LABEL_0, LABEL_1, ... (transformers' names)."""
        rows = len(self.weights["classifier.weight"]) if "classifier.weight" in self.weights else 2
        if self.head_config.id2label is None:
            return [f"LABEL_{i}" for i in range(rows)]
        return [label for _, label in self.head_config.id2label]

    def _classifier(self, architecture: str, other: str, other_task: str) -> Linear:
        """The `classifier` tensors, checked against id2label, for a head of `architecture` (not `other`)."""
        declared = self.head_config.architecture
        if declared == other:
            raise ValueError(
                f"{self.source}: its classifier belongs to a {other} (config.json's architectures); "
                f"use {other_task} instead"
            )
        if declared is not None and declared.startswith("BertFor") and declared != architecture:
            raise ValueError(
                f"{self.source}: config.json's architectures is {declared}; this task needs a "
                f"checkpoint saved from {architecture}"
            )
        h = self.config.hidden_size
        rows = self.weights["classifier.weight"].shape[0] if "classifier.weight" in self.weights else len(self.labels)
        w = self._take(
            f"{architecture} classifier",
            {"classifier.weight": (rows, h), "classifier.bias": (rows,)},
            f"this task needs a checkpoint saved from {architecture}",
        )
        if len(self.labels) != rows:
            raise ValueError(
                f"{self.source}: config.json's id2label names {len(self.labels)} labels but the "
                f"classifier has {rows} outputs"
            )
        return Linear(w["classifier.weight"], w["classifier.bias"])

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

    def _require_pooler(self, task: str) -> None:
        if "pooler.dense.weight" not in self.weights:
            raise ValueError(f"{self.source} has no pooler (pooler.dense.*), which {task} runs on")
