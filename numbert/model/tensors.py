"""The encoder's tensors: their names in a BERT checkpoint (a bare transformers `BertModel`) and their shapes.

numbert.model.encoder builds the encoder from tensors by these names; numbert.checkpoint.weights reads a checkpoint's
tensors under these names (whatever the file format named them) and checks them against these shapes.
BERT's relatives name theirs their own way: `bert_name` renames them to BERT's (RENAMES), so the one
encoder reads them all.
"""

from __future__ import annotations

import mmap
import re

import numpy as np

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
# The modern family's layers (Member.rotary), under encoder.layer.{i}.: one fused Linear for Q, K and V; the
# norms keep BERT's names, though ModernBERT's (pre-norm) come before their sublayer; a gated feed-forward's up
# projection is intermediate.dense, holding the gate too where the checkpoint fuses them (Member.glu)
ROTARY_LAYER_NAMES = {
    "qkv": "attention.self.qkv",  # (3 hidden, hidden): Q, K, V one under the other
    "attention_output": "attention.output.dense",
    "up": "intermediate.dense",  # (intermediate, hidden), or (2 intermediate, hidden) holding the gate too
    "gate": "intermediate.gate",  # NomicBERT's fc12: the gate, a Linear of its own
    "down": "output.dense",
    "attention_norm": "attention.output.LayerNorm",  # ModernBERT: attn_norm, before attention (none in layer 0)
    "feed_forward_norm": "output.LayerNorm",  # ModernBERT: mlp_norm, before the feed-forward
}
FINAL_NORM_NAME = "final_norm"  # ModernBERT: the LayerNorm after the last layer
# the decoder-shaped embedders' layers (numbert.model.decoder), under encoder.layer.{i}., as transformers names them
DECODER_LAYER_NAMES = {
    "query": "self_attn.q_proj",
    "key": "self_attn.k_proj",
    "value": "self_attn.v_proj",
    "attention_output": "self_attn.o_proj",
    "gate": "mlp.gate_proj",
    "up": "mlp.up_proj",
    "down": "mlp.down_proj",
    "query_norm": "self_attn.q_norm",  # RMSNorm of each query head, and
    "key_norm": "self_attn.k_norm",  # of each key head, before the rotation
    "attention_norm": "input_layernorm",  # before attention
    "attention_output_norm": "post_attention_layernorm",  # Gemma3: after attention, before the residual add
    "feed_forward_norm": "pre_feedforward_layernorm",  # Gemma3: before the feed-forward
    "feed_forward_output_norm": "post_feedforward_layernorm",  # Gemma3: after it, before the residual add
}
# Qwen3 has two norms a layer: input_layernorm, and post_attention_layernorm, which comes *before* its feed-forward
QWEN3_FEED_FORWARD_NORM = "post_attention_layernorm"
LOW_RANK = ("lora_A", "lora_B")  # jina-embeddings-v3: a weight's task adapters, {name}.lora_A and {name}.lora_B

# Each family member's own names -> BERT's, by whole dotted parts from the start of the name (its prefix, such as
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
_LAYERS = {"layers": "encoder.layer", "encoder.layers": "encoder.layer"}  # the modern family's layer list
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
    "modernbert": {  # its prediction head `head` (dense, norm) serves the masked LM and the classifiers: kept
        "embeddings.tok_embeddings": "embeddings.word_embeddings",
        "embeddings.norm": "embeddings.LayerNorm",
        **_LAYERS,
        "decoder.weight": "cls.predictions.decoder.weight",
        "decoder.bias": "cls.predictions.bias",
    },
    "nomic_bert": {
        "emb_ln": "embeddings.LayerNorm",
        **_LAYERS,
        "cls.predictions.transform.layer_norm": "cls.predictions.transform.LayerNorm",
    },
    "gte": {
        "lm_head.dense": "cls.predictions.transform.dense",
        "lm_head.layer_norm": "cls.predictions.transform.LayerNorm",
        "lm_head.norm": "cls.predictions.transform.LayerNorm",  # Alibaba's remote code's name
        "lm_head.decoder.weight": "cls.predictions.decoder.weight",
        "lm_head.decoder.bias": "cls.predictions.bias",
    },
    "jina_embeddings_v3": {"emb_ln": "embeddings.LayerNorm", **_LAYERS, **_LM_HEAD},
}
RENAMES["new"] = RENAMES["gte"]
# the decoder-shaped embedders (Qwen3, Gemma3): transformers' `model.` prefix removed (Member.prefix), the table,
# the layer list and the final norm renamed; inside a layer, transformers' own names (DECODER_LAYER_NAMES)
_DECODER = {"embed_tokens": "embeddings.word_embeddings", **_LAYERS, "norm": FINAL_NORM_NAME}
RENAMES["qwen3"] = _DECODER
# Gemma3ForConditionalGeneration (Gemma 3 with its vision tower): the text model under language_model.model. as saved,
# model.language_model. as transformers 5 names it in memory; the vision tower's tensors are left unread
RENAMES["gemma3_text"] = _DECODER | {
    f"{under}.{own}": bert for under in ("language_model.model", "language_model") for own, bert in _DECODER.items()
}
LAYER_RENAMES |= {
    "modernbert": {
        "attn_norm": "attention.output.LayerNorm",
        "attn.Wqkv": "attention.self.qkv",
        "attn.Wo": "attention.output.dense",
        "mlp_norm": "output.LayerNorm",
        "mlp.Wi": "intermediate.dense",
        "mlp.Wo": "output.dense",
    },
    "nomic_bert": {
        "attn.Wqkv": "attention.self.qkv",
        "attn.out_proj": "attention.output.dense",
        "norm1": "attention.output.LayerNorm",
        "mlp.fc11": "intermediate.dense",
        "mlp.fc12": "intermediate.gate",
        "mlp.fc2": "output.dense",
        "norm2": "output.LayerNorm",
    },
    "gte": {
        "attention.qkv_proj": "attention.self.qkv",
        "attention.o_proj": "attention.output.dense",
        "attn_ln": "attention.output.LayerNorm",
        "mlp.up_gate_proj": "intermediate.dense",
        "mlp.down_proj": "output.dense",
        "mlp_ln": "output.LayerNorm",
    },
    "jina_embeddings_v3": {
        "mixer.Wqkv": "attention.self.qkv",
        "mixer.out_proj": "attention.output.dense",
        "norm1": "attention.output.LayerNorm",
        "mlp.fc1": "intermediate.dense",
        "mlp.fc2": "output.dense",
        "norm2": "output.LayerNorm",
    },
}
LAYER_RENAMES["new"] = LAYER_RENAMES["gte"]
# torch's parametrize (jina's LoRA): a weight saved as {name}.parametrizations.weight.original, its adapters as
# {name}.parametrizations.weight.0.lora_A / lora_B
PARAMETRIZED = re.compile(r"(.*)\.parametrizations\.weight\.(?:original|0\.(lora_[AB]))")
LAYER = re.compile(r"(encoder\.layer\.\d+\.)(.*)")


def bert_name(name: str, config: BertConfig) -> str:
    """A checkpoint's tensor name as BERT's: `distilbert.transformer.layer.0.ffn.lin1.weight` ->
    `encoder.layer.0.intermediate.dense.weight`; `lm_head.bias` -> `cls.predictions.bias`."""
    parametrized = PARAMETRIZED.fullmatch(name)
    if parametrized:
        name = f"{parametrized[1]}.{parametrized[2] or 'weight'}"
    name = _renamed(name.removeprefix(config.member.prefix), RENAMES.get(config.model_type, {}))
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
    """Every tensor a BERT encoder (or a family member's, renamed by `bert_name`) needs, by its bare `BertModel`
    name, with its shape.

    Linear weights are stored as torch does, (out_features, in_features): y = x @ W.T + b.
    """
    if config.member.decoder is not None:
        return decoder_tensor_shapes(config)
    if config.member.rotary:
        return rotary_tensor_shapes(config)
    h, i, e = config.hidden_size, config.intermediate_size, config.embedding_width
    word, position, segment, norm = (EMBEDDING_NAMES[k] for k in ("word", "position", "segment", "norm"))
    shapes = {
        f"{word}.weight": (config.vocab_size, e),
        f"{position}.weight": (config.max_position_embeddings, e),
        f"{segment}.weight": (config.type_vocab_size, e),
        f"{norm}.weight": (e,),
        f"{norm}.bias": (e,),
    }
    if not config.member.token_types:
        del shapes[f"{segment}.weight"]
    if e != h:
        shapes |= {f"{PROJECTION_NAME}.weight": (h, e), f"{PROJECTION_NAME}.bias": (h,)}
    if config.member.relative_attention:
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


def rotary_tensor_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """The modern family's tensors (Member.rotary) by their names here (ROTARY_LAYER_NAMES), with their shapes:
    no position table; a fused QKV; a gated feed-forward's gate (fused into the up projection, or NomicBERT's own);
    biases and LayerNorm shifts where config.biases has them; ModernBERT's final norm and no norm before layer 0's
    attention; jina-embeddings-v3's task adapters (LOW_RANK) on every Linear and embedding table."""
    h, i, r = config.hidden_size, config.intermediate_size, config.member
    word, segment, norm = (EMBEDDING_NAMES[k] for k in ("word", "segment", "norm"))
    biases = set(config.biases)

    def linear(name: str, rows: int, columns: int, kind: str) -> dict[str, tuple[int, ...]]:
        return {f"{name}.weight": (rows, columns), **({f"{name}.bias": (rows,)} if kind in biases else {})}

    def layer_norm(name: str) -> dict[str, tuple[int, ...]]:
        return {f"{name}.weight": (h,), **({f"{name}.bias": (h,)} if "norm" in biases else {})}

    shapes: dict[str, tuple[int, ...]] = {f"{word}.weight": (config.vocab_size, h)}
    if config.type_vocab_size:
        shapes[f"{segment}.weight"] = (config.type_vocab_size, h)
    shapes |= layer_norm(norm)
    up_rows = 2 * i if r.glu in ("gate_first", "up_first") else i
    for n in range(config.num_hidden_layers):
        names = {field: f"encoder.layer.{n}.{name}" for field, name in ROTARY_LAYER_NAMES.items()}
        shapes |= linear(names["qkv"], 3 * h, h, "qkv") | linear(names["attention_output"], h, h, "attention_output")
        if not (r.pre_norm and n == 0):
            shapes |= layer_norm(names["attention_norm"])
        shapes |= linear(names["up"], up_rows, h, "up")
        if r.glu == "two":
            shapes |= linear(names["gate"], i, h, "up")
        shapes |= linear(names["down"], h, i, "down") | layer_norm(names["feed_forward_norm"])
    if r.pre_norm:
        shapes |= layer_norm(FINAL_NORM_NAME)
    shapes[f"{POOLER_NAME}.weight"] = (h, h)
    shapes[f"{POOLER_NAME}.bias"] = (h,)
    tasks = len(config.task_adapters)
    if tasks:  # jina: an adapter per task on each table and Linear, A (tasks, r, in) and B (tasks, out, r)
        rank, adapted = config.lora_rank, dict(shapes)
        for name, shape in adapted.items():
            base = name.removesuffix(".weight")
            if not name.endswith(".weight") or len(shape) != 2:
                continue
            if base.startswith(
                "embeddings."
            ):  # an embedding table (rows, hidden): A (tasks, rows, r), B (tasks, r, hidden)
                shapes |= {f"{base}.lora_A": (tasks, shape[0], rank), f"{base}.lora_B": (tasks, rank, shape[1])}
            else:
                shapes |= {f"{base}.lora_A": (tasks, rank, shape[1]), f"{base}.lora_B": (tasks, shape[0], rank)}
    return shapes


def decoder_layer_names(config: BertConfig, layer: int) -> dict[str, str]:
    """The tensor name (less `.weight` / `.bias`) of each of a decoder layer's parts (DECODER_LAYER_NAMES' fields):
    Gemma3's four norms a layer; Qwen3's two, its feed-forward's norm named post_attention_layernorm."""
    names = {field: f"encoder.layer.{layer}.{name}" for field, name in DECODER_LAYER_NAMES.items()}
    if config.member.decoder == "qwen3":
        del names["attention_output_norm"], names["feed_forward_output_norm"]
        names["feed_forward_norm"] = f"encoder.layer.{layer}.{QWEN3_FEED_FORWARD_NORM}"
    return names


def decoder_tensor_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """The decoder-shaped embedders' tensors (Qwen3, Gemma3) by their names here, with their shapes: the word table,
    per layer Q (heads x head, hidden), K and V (key/value heads x head, hidden), O, the gated feed-forward's three,
    the norms (a gain each: RMSNorm has no shift; q/k norms one head wide), biases on Q, K, V, O where
    attention_bias says; the final norm. No pooler."""
    h, i, d = config.hidden_size, config.intermediate_size, config.head_size
    q, kv = config.num_attention_heads * d, config.key_value_heads * d
    biases = "qkv" in config.biases
    shapes: dict[str, tuple[int, ...]] = {f"{EMBEDDING_NAMES['word']}.weight": (config.vocab_size, h)}
    for n in range(config.num_hidden_layers):
        names = decoder_layer_names(config, n)
        widths: dict[str, tuple[int, ...]] = {
            "query": (q, h),
            "key": (kv, h),
            "value": (kv, h),
            "attention_output": (h, q),
        }
        widths |= {"gate": (i, h), "up": (i, h), "down": (h, i), "query_norm": (d,), "key_norm": (d,)}
        for field, name in names.items():
            shapes[f"{name}.weight"] = widths.get(field, (h,))
            if biases and field in ("query", "key", "value", "attention_output"):
                shapes[f"{name}.bias"] = widths[field][:1]
    shapes[f"{FINAL_NORM_NAME}.weight"] = (h,)
    return shapes


def file_backed(array: np.ndarray) -> bool:
    """Whether `array` is a view of a memory-mapped file (np.memmap, numbert's safetensors reader)."""
    base: object = array
    while isinstance(base, np.ndarray):
        if isinstance(base, np.memmap):
            return True
        base = base.base
    return isinstance(base, mmap.mmap)


def own_bytes(weights: dict[str, np.ndarray]) -> int:
    """The bytes of `weights` held in the process's own memory (widened from bf16, read from a .bin or a TF bundle,
    stacked), not views of the checkpoint's mapped file: what every process loading the model holds for itself,
    where mapped pages are one copy in the page cache, shared."""
    return sum(w.nbytes for w in weights.values() if not file_backed(w))
