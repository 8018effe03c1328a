"""Write tests/fixtures/tf_bert/: a tiny BERT checkpoint saved by real TensorFlow, in Google's release layout.

The layout is that of google-research/bert's `uncased_L-12_H-768_A-12/` after `run_pretraining.py`:
variables `bert/...` and the pre-training heads `cls/predictions/...`, `cls/seq_relationship/...`,
created with `tf.compat.v1.get_variable` under the same scopes and names as Google's modeling.py,
plus `global_step` and Adam slots (`.../adam_m`, `.../adam_v`), saved by `tf.compat.v1.train.Saver`
(the checkpoint V2 "tensor bundle" format), with `bert_config.json` and `vocab.txt` beside it.

    tf_bert/            bert_model.ckpt.{index,data-00000-of-00001}, checkpoint, bert_config.json, vocab.txt
    tf_bert_sharded/    the same model variables saved with Saver(sharded=True) over two CPU devices:
                        bert_model.ckpt.data-00000-of-00002 and -00001-of-00002, one merged index
    tf_bert_tensors.npz every model variable as TensorFlow itself reads it back (tf.train.load_checkpoint),
                        so the tests check numbert's reader without TensorFlow

No `.meta` graph is written (numbert does not read it; it would only make the fixture bigger).
TensorFlow is not a numbert dependency; run this with a separate environment:

    python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu numpy
    /tmp/tfvenv/bin/python scripts/make_tf_fixture.py
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
CONFIG = {  # Google's bert_config.json keys: no layer_norm_eps, no pad_token_id, no model_type
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 32,
    "initializer_range": 0.02,
    "intermediate_size": 64,
    "max_position_embeddings": 40,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "type_vocab_size": 2,
    "vocab_size": 60,
}
WORDS = [
    "the",
    "a",
    "is",
    "of",
    "and",
    "to",
    "in",
    "it",
    "was",
    "on",
    "for",
    "that",
    "with",
    "as",
    "he",
    "she",
    "they",
    "at",
    "by",
    "this",
    "from",
    "or",
    "have",
    "an",
    "but",
    "not",
    "bank",
    "river",
    "money",
    "fish",
    "##s",
    "##ing",
    "##ed",
    ".",
    ",",
    "!",
    "?",
    "'",
    "un",
    "##able",
]
VOCAB = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
VOCAB += [f"[unused{i}]" for i in range(1, CONFIG["vocab_size"] - len(VOCAB) + 1)]


def model_variables(config: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Google's variable names and shapes (kernels (in, out)), random values (biases and LayerNorm not trivial)."""
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]

    def normal(*shape, mean=0.0, std=0.05):
        return (mean + std * rng.standard_normal(shape)).astype(np.float32)

    variables = {
        "bert/embeddings/word_embeddings": normal(v, h, std=0.5),
        "bert/embeddings/token_type_embeddings": normal(config["type_vocab_size"], h, std=0.5),
        "bert/embeddings/position_embeddings": normal(config["max_position_embeddings"], h, std=0.5),
    }

    def dense(scope, n_in, n_out, std=0.2):
        variables[f"{scope}/kernel"] = normal(n_in, n_out, std=std)
        variables[f"{scope}/bias"] = normal(n_out)

    def layer_norm(scope):
        variables[f"{scope}/gamma"] = normal(h, mean=1.0, std=0.1)
        variables[f"{scope}/beta"] = normal(h)

    layer_norm("bert/embeddings/LayerNorm")
    for n in range(config["num_hidden_layers"]):
        scope = f"bert/encoder/layer_{n}"
        for name in ("query", "key", "value"):
            dense(f"{scope}/attention/self/{name}", h, h)
        dense(f"{scope}/attention/output/dense", h, h)
        layer_norm(f"{scope}/attention/output/LayerNorm")
        dense(f"{scope}/intermediate/dense", h, i)
        dense(f"{scope}/output/dense", i, h)
        layer_norm(f"{scope}/output/LayerNorm")
    dense("bert/pooler/dense", h, h)
    dense("cls/predictions/transform/dense", h, h)
    variables["cls/predictions/transform/LayerNorm/gamma"] = normal(h, mean=1.0, std=0.1)
    variables["cls/predictions/transform/LayerNorm/beta"] = normal(h)
    variables["cls/predictions/output_bias"] = normal(v)
    variables["cls/seq_relationship/output_weights"] = normal(2, h, std=0.2)  # (2, hidden): not a kernel
    variables["cls/seq_relationship/output_bias"] = normal(2)
    return variables


def save(directory: Path, variables: dict[str, np.ndarray], *, optimizer_slots: bool, devices: int) -> None:
    """Create the variables in a TF1 graph (spread over `devices` CPU devices) and save them with Saver."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    rng = np.random.default_rng(1)
    graph = tf.Graph()
    with graph.as_default():
        created = []
        for k, (name, value) in enumerate(variables.items()):
            with tf.device(f"/cpu:{k % devices}"):
                created.append(tf.compat.v1.get_variable(name, initializer=tf.constant(value)))
                if optimizer_slots:  # AdamWeightDecayOptimizer's slots, named as Google's optimization.py names them
                    for slot in ("adam_m", "adam_v"):
                        created.append(
                            tf.compat.v1.get_variable(
                                f"{name}/{slot}",
                                initializer=tf.constant(
                                    np.abs(rng.standard_normal(value.shape)).astype(np.float32) * 1e-3
                                ),
                            )
                        )
        if optimizer_slots:
            tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver(sharded=devices > 1, save_relative_paths=True)
        session_config = tf.compat.v1.ConfigProto(device_count={"CPU": devices})
        with tf.compat.v1.Session(graph=graph, config=session_config) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            if optimizer_slots:
                session.run(tf.compat.v1.assign(tf.compat.v1.train.get_global_step(), 1000))
            saver.save(session, str(directory / "bert_model.ckpt"), write_meta_graph=False)
    (directory / "bert_config.json").write_text(json.dumps(CONFIG, indent=2) + "\n", encoding="utf-8")
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")


def main() -> None:
    variables = model_variables(CONFIG, np.random.default_rng(0))
    save(FIXTURES / "tf_bert", variables, optimizer_slots=True, devices=1)
    save(FIXTURES / "tf_bert_sharded", variables, optimizer_slots=False, devices=2)
    reader = tf.train.load_checkpoint(str(FIXTURES / "tf_bert" / "bert_model.ckpt"))
    read_back = {name: reader.get_tensor(name) for name in variables}
    for name, value in variables.items():
        np.testing.assert_array_equal(read_back[name], value, err_msg=name)
    sharded = tf.train.load_checkpoint(str(FIXTURES / "tf_bert_sharded" / "bert_model.ckpt"))
    for name, value in variables.items():
        np.testing.assert_array_equal(sharded.get_tensor(name), value, err_msg=name)
    np.savez(FIXTURES / "tf_bert_tensors.npz", **read_back)
    shards = sorted(p.name for p in (FIXTURES / "tf_bert_sharded").glob("*.data-*"))
    print(
        f"wrote {len(reader.get_variable_to_shape_map())} variables (TensorFlow {tf.__version__}); "
        f"sharded copy: {shards}"
    )


if __name__ == "__main__":
    main()
