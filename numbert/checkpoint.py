"""Read BERT weights from a checkpoint into NumPy arrays named as a bare transformers `BertModel`."""

from __future__ import annotations

from .config import BertConfig


def tensor_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a BERT encoder needs, by its bare `BertModel` name, with its shape.

    Linear weights are stored as torch does, (out_features, in_features): y = x @ W.T + b.
    """
    h, i = config.hidden_size, config.intermediate_size
    shapes = {
        "embeddings.word_embeddings.weight": (config.vocab_size, h),
        "embeddings.position_embeddings.weight": (config.max_position_embeddings, h),
        "embeddings.token_type_embeddings.weight": (config.type_vocab_size, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for n in range(config.num_hidden_layers):
        layer = f"encoder.layer.{n}"
        for name, out_features, in_features in (
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", i, h),
            ("output.dense", h, i),
        ):
            shapes[f"{layer}.{name}.weight"] = (out_features, in_features)
            shapes[f"{layer}.{name}.bias"] = (out_features,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"{layer}.{norm}.weight"] = (h,)
            shapes[f"{layer}.{norm}.bias"] = (h,)
    shapes["pooler.dense.weight"] = (h, h)
    shapes["pooler.dense.bias"] = (h,)
    return shapes
