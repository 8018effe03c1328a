"""The encoder's tensors: their names in a BERT checkpoint (a bare transformers `BertModel`) and their shapes.

numbert.model.encoder builds the encoder from tensors by these names; numbert.checkpoint.weights reads a checkpoint's
tensors under these names (whatever the file format named them) and checks them against these shapes.
BERT's relatives name theirs their own way: `bert_name` renames them to BERT's (RENAMES), so the one
encoder reads them all.
"""

from __future__ import annotations

import re

from .config import BertConfig

# The encoder's weights by their names in numbert.model.encoder, and the names a BERT checkpoint (a bare
# transformers BertModel) gives them, less the `.weight` / `.bias` suffix: the one place the two meet.
EMBEDDING_NAMES = {
    "word": "embeddings.word_embeddings",
    "position": "embeddings.position_embeddings",
    "segment": "embeddings.token_type_embeddings",
    "norm": "embeddings.LayerNorm",
}
LAYER_NAMES = {  # under encoder.layer.{i}.; Linear weights first, then the norms (the order checkpoints list them)
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "attention_output": "attention.output.dense",
    "up": "intermediate.dense",  # the feed-forward network's first Linear, hidden -> intermediate
    "down": "output.dense",  # and its second, intermediate -> hidden
    "attention_norm": "attention.output.LayerNorm",
    "feed_forward_norm": "output.LayerNorm",
}
PROJECTION_NAME = "embeddings_project"  # ELECTRA: embedding_size -> hidden_size, when the two differ
RELATIVE_ATTENTION_NAME = "encoder.relative_attention_bias"  # MPNet: (buckets, heads), one bias per head and bucket

# Each relative's own names -> BERT's, by whole dotted parts from the start of the name (its prefix, such as
# `distilbert.`, removed first). Under `encoder.layer.{i}.`, LAYER_RENAMES; masked-LM heads become BERT's
# `cls.predictions.*`, so numbert.model.heads reads one masked-LM head.
LAYER_RENAMES = {
    "distilbert": {
        "attention.q_lin": "attention.self.query",
        "attention.k_lin": "attention.self.key",
        "attention.v_lin": "attention.self.value",
        "attention.out_lin": "attention.output.dense",
        "sa_layer_norm": "attention.output.LayerNorm",
        "ffn.lin1": "intermediate.dense",
        "ffn.lin2": "output.dense",
        "output_layer_norm": "output.LayerNorm",
    },
    "mpnet": {
        "attention.attn.q": "attention.self.query",
        "attention.attn.k": "attention.self.key",
        "attention.attn.v": "attention.self.value",
        "attention.attn.o": "attention.output.dense",
        "attention.LayerNorm": "attention.output.LayerNorm",
    },
}
_LM_HEAD = {  # RobertaLMHead, MPNetLMHead
    "lm_head.dense": "cls.predictions.transform.dense",
    "lm_head.layer_norm": "cls.predictions.transform.LayerNorm",
    "lm_head.decoder": "cls.predictions.decoder",
    "lm_head.bias": "cls.predictions.bias",
}
RENAMES = {
    "roberta": _LM_HEAD,
    "xlm-roberta": _LM_HEAD,
    "mpnet": _LM_HEAD,
    "distilbert": {
        "transformer.layer": "encoder.layer",
        "vocab_transform": "cls.predictions.transform.dense",
        "vocab_layer_norm": "cls.predictions.transform.LayerNorm",
        "vocab_projector.weight": "cls.predictions.decoder.weight",
        "vocab_projector.bias": "cls.predictions.bias",
    },
    "electra": {  # ElectraForMaskedLM, the generator
        "generator_predictions.dense": "cls.predictions.transform.dense",
        "generator_predictions.LayerNorm": "cls.predictions.transform.LayerNorm",
        "generator_lm_head.weight": "cls.predictions.decoder.weight",
        "generator_lm_head.bias": "cls.predictions.bias",
    },
}
LAYER = re.compile(r"(encoder\.layer\.\d+\.)(.*)")


def bert_name(name: str, config: BertConfig) -> str:
    """A checkpoint's tensor name as BERT's: `distilbert.transformer.layer.0.ffn.lin1.weight` ->
    `encoder.layer.0.intermediate.dense.weight`; `lm_head.bias` -> `cls.predictions.bias`."""
    name = _renamed(name.removeprefix(config.relative.prefix), RENAMES.get(config.model_type, {}))
    layer = LAYER.fullmatch(name)
    return layer[1] + _renamed(layer[2], LAYER_RENAMES.get(config.model_type, {})) if layer else name


def _renamed(name: str, renames: dict[str, str]) -> str:
    """`name` with its leading dotted parts renamed, if `renames` names them."""
    for own, bert in renames.items():
        if name == own or name.startswith(own + "."):
            return bert + name[len(own) :]
    return name


MAX_DIMS = 64  # the most dims a NumPy array can have: a checkpoint's tensor claiming more is refused, by name
POOLER_NAME = "pooler.dense"
POOLER = (
    f"{POOLER_NAME}.weight",
    f"{POOLER_NAME}.bias",
)  # absent where the model was built without it (BertForMaskedLM)


def tensor_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a BERT encoder (or a relative's, renamed by `bert_name`) needs, by its bare `BertModel`
    name, with its shape.

    Linear weights are stored as torch does, (out_features, in_features): y = x @ W.T + b.
    """
    h, i, e = config.hidden_size, config.intermediate_size, config.embedding_width
    word, position, segment, norm = (EMBEDDING_NAMES[k] for k in ("word", "position", "segment", "norm"))
    shapes = {
        f"{word}.weight": (config.vocab_size, e),
        f"{position}.weight": (config.max_position_embeddings, e),
        f"{segment}.weight": (config.type_vocab_size, e),
        f"{norm}.weight": (e,),
        f"{norm}.bias": (e,),
    }
    if not config.relative.token_types:
        del shapes[f"{segment}.weight"]
    if e != h:
        shapes |= {f"{PROJECTION_NAME}.weight": (h, e), f"{PROJECTION_NAME}.bias": (h,)}
    if config.relative.relative_attention:
        shapes[f"{RELATIVE_ATTENTION_NAME}.weight"] = (
            config.relative_attention_num_buckets,
            config.num_attention_heads,
        )
    layer_shapes = {
        "query": (h, h),
        "key": (h, h),
        "value": (h, h),
        "attention_output": (h, h),
        "up": (i, h),
        "down": (h, i),
        "attention_norm": (h,),
        "feed_forward_norm": (h,),
    }
    for n in range(config.num_hidden_layers):
        for field, name in LAYER_NAMES.items():
            shapes[f"encoder.layer.{n}.{name}.weight"] = layer_shapes[field]
            shapes[f"encoder.layer.{n}.{name}.bias"] = layer_shapes[field][:1]
    shapes[f"{POOLER_NAME}.weight"] = (h, h)
    shapes[f"{POOLER_NAME}.bias"] = (h,)
    return shapes
