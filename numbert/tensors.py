"""The encoder's tensors: their names in a BERT checkpoint (a bare transformers `BertModel`) and their shapes.

numbert.model builds the encoder from tensors by these names; numbert.checkpoint reads a checkpoint's
tensors under these names (whatever the file format named them) and checks them against these shapes.
"""

from __future__ import annotations

from .config import BertConfig

# The encoder's weights by their names in numbert.model, and the names a BERT checkpoint (a bare
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
MAX_DIMS = 64  # the most dims a NumPy array can have: a checkpoint's tensor claiming more is refused, by name
POOLER_NAME = "pooler.dense"
POOLER = (
    f"{POOLER_NAME}.weight",
    f"{POOLER_NAME}.bias",
)  # absent where the model was built without it (BertForMaskedLM)


def tensor_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a BERT encoder needs, by its bare `BertModel` name, with its shape.

    Linear weights are stored as torch does, (out_features, in_features): y = x @ W.T + b.
    """
    h, i = config.hidden_size, config.intermediate_size
    word, position, segment, norm = (EMBEDDING_NAMES[k] for k in ("word", "position", "segment", "norm"))
    shapes = {
        f"{word}.weight": (config.vocab_size, h),
        f"{position}.weight": (config.max_position_embeddings, h),
        f"{segment}.weight": (config.type_vocab_size, h),
        f"{norm}.weight": (h,),
        f"{norm}.bias": (h,),
    }
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
