"""Google's TensorFlow BERT checkpoints (`bert_model.ckpt.index` + `.data-*` shards, read by `tf_bundle`) under
transformers' names: `bert/encoder/layer_0/attention/self/query/kernel` becomes
`bert.encoder.layer.0.attention.self.query.weight`, kernels transposed.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from . import tf_bundle
from .tensor_bytes import widen

GOOGLE_LEAVES = {  # last part of a Google variable name -> transformers' parameter name
    "kernel": "weight",
    "gamma": "weight",
    "beta": "bias",
    "bias": "bias",
    "output_weights": "weight",
    "output_bias": "bias",
}
OPTIMIZER_STATE = ("adam_m", "adam_v", "global_step")  # AdamWeightDecayOptimizer's slots and the step counter


def transformers_name(google_name: str) -> str | None:
    """The transformers name of a variable in Google's BERT checkpoints; None for optimizer state.

    bert/embeddings/word_embeddings                  -> bert.embeddings.word_embeddings.weight
    bert/encoder/layer_3/output/LayerNorm/gamma      -> bert.encoder.layer.3.output.LayerNorm.weight
    bert/pooler/dense/kernel                         -> bert.pooler.dense.weight (transpose it)
    cls/predictions/output_bias                      -> cls.predictions.bias
    cls/seq_relationship/output_weights (2, hidden)  -> cls.seq_relationship.weight (as it is)
    cls/squad/output_weights, output_weights         -> qa_outputs.weight, classifier.weight
    """
    *scope, leaf = google_name.split("/")
    if leaf in OPTIMIZER_STATE or any(part.startswith("AdamWeightDecayOptimizer") for part in scope):
        return None
    if leaf.endswith("_embeddings"):
        scope, leaf = [*scope, leaf], "weight"
    else:
        leaf = GOOGLE_LEAVES.get(leaf, leaf)
    if scope[:2] == ["cls", "squad"]:  # run_squad.py's head
        scope = ["qa_outputs", *scope[2:]]
    elif not scope:  # run_classifier.py's head: output_weights (labels, hidden), output_bias
        scope = ["classifier"]
    return ".".join([re.sub(r"^layer_(\d+)$", r"layer.\1", part) for part in scope] + [leaf])


def read_tf_checkpoint(prefix: str | Path, *, verify_crc: bool = True) -> dict[str, np.ndarray]:
    """Every model variable of the TensorFlow checkpoint at `prefix`, by transformers name, widened to float32.

    Kernels, stored (in, out), are returned transposed, (out, in) as torch stores them (a view, not a copy).
    """
    tensors = tf_bundle.read_bundle(
        prefix, select=lambda name: transformers_name(name) is not None, verify_crc=verify_crc
    )
    renamed = {}
    for google_name, (tensor, dtype) in tensors.items():
        tensor = widen(tensor, dtype)
        renamed[str(transformers_name(google_name))] = tensor.T if google_name.endswith("/kernel") else tensor
    return renamed
