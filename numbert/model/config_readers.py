"""The modern members' config.json readers: each reads its config's shapes (transformers 5's and its authors'
remote code's) into BertConfig's fields (numbert.model.config's FAMILY names each member's reader), with the checks
they share: a field's kind, a size's limit, an option numbert does not build (refused, naming it)."""

from __future__ import annotations

from collections.abc import Mapping

from .rotary import Rope

BIASES = ("qkv", "attention_output", "up", "down", "norm")  # the tensor kinds that may carry a bias (BertConfig.biases)
LAYER_TYPES = ("full_attention", "sliding_attention")  # ModernBERT's layer kinds, as transformers 5 names them


# the largest number a config may ask for, by field: read before anything is built from it (ModernBERT's list of
# layer kinds, the names of the tensors to look for), then the weights must agree; far above any released encoder's
SIZE_LIMITS = {
    "vocab_size": 1 << 24,
    "hidden_size": 1 << 16,
    "num_hidden_layers": 1024,
    "num_attention_heads": 1 << 16,
    "intermediate_size": 1 << 18,
    "max_position_embeddings": 1 << 20,
    "type_vocab_size": 1 << 16,
    "embedding_size": 1 << 16,
    "relative_attention_num_buckets": 1 << 16,
    "local_attention": 1 << 21,
    "lora_rank": 1 << 16,
}


def check_sizes(values: Mapping, source: str) -> None:
    """Refuse an integer of SIZE_LIMITS' fields above its limit, naming the field and the limit (other types are
    left to BertConfig's own checks)."""
    for key, limit in SIZE_LIMITS.items():
        value = values.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise ValueError(f"{source}: {key} is {value}; numbert allows at most {limit:,}")


def clipped(value: object, width: int = 80) -> str:
    """repr(value), cut to `width` characters (an error line quotes what a file holds, never all of it)."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def config_number(d: dict, key: str, default, source: str, kind: type = int):
    """d[key] (default if absent or null), checked to be a `kind` (int: not a bool, float: int or float)."""
    value = d.get(key)
    if value is None:
        return default
    kinds = (int, float) if kind is float else (kind,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ValueError(
            f"{source}: {key} must be {'a number' if kind is float else 'an integer'}, got {clipped(value)}"
        )
    return value


def refuse_options(d: dict, source: str, flags: Mapping[str, tuple[object, str]]) -> None:
    """Refuse each key of `flags` whose value in `d` is not its allowed one, naming the key and why."""
    for key, (allowed, why) in flags.items():
        if key in d and d[key] != allowed and not (allowed is None and d[key] is None):
            raise ValueError(f"{source}: {key} is {clipped(d[key])}; numbert runs {allowed!r} only ({why})")


def bias_kinds(**flags: bool) -> tuple[str, ...]:
    """The kinds of BIASES whose flag is true."""
    return tuple(kind for kind in BIASES if flags.get(kind, False))


def rope_from(parameters: dict, theta: float, positions: int, source: str) -> Rope:
    """A Rope from rope_parameters (or an older rope_scaling), its theta defaulting to `theta`."""
    if not isinstance(parameters, dict):
        raise ValueError(f"{source}: rope_parameters must be an object, got {clipped(parameters)}")
    return Rope.from_dict({"rope_theta": theta, **parameters}, positions, source)


def rope_of(d: dict, theta: float, source: str) -> Rope:
    """The one Rope of a config: transformers 5's rope_parameters, else rope_theta and rope_scaling."""
    positions = config_number(d, "max_position_embeddings", 512, source)
    if d.get("rope_parameters") is not None:
        return rope_from(d["rope_parameters"], theta, positions, f"{source}: rope_parameters")
    theta = config_number(d, "rope_theta", theta, source, float)
    return rope_from(d.get("rope_scaling") or {}, theta, positions, f"{source}: rope_scaling")


def read_modernbert(d: dict, source: str) -> dict:
    """ModernBERT's config in its two shapes: transformers 5's layer_types and rope_parameters (one per layer
    kind), or the older global_attn_every_n_layers, global_rope_theta and local_rope_theta."""
    layers = config_number(d, "num_hidden_layers", 22, source)
    check_sizes({"num_hidden_layers": layers}, source)  # before a list of that many layer kinds is built
    types = d.get("layer_types")
    if types is None:
        every = config_number(d, "global_attn_every_n_layers", 3, source)
        if every < 1:
            raise ValueError(f"{source}: global_attn_every_n_layers must be at least 1, got {every}")
        types = [LAYER_TYPES[bool(i % every)] for i in range(layers)]  # layer 0 global, then every `every`-th
    elif not isinstance(types, list) or len(types) != layers:
        count = f"a list of {len(types)}" if isinstance(types, list) else clipped(types)
        raise ValueError(f"{source}: layer_types must name each of the {layers} layers' kind, got {count}")
    positions = config_number(d, "max_position_embeddings", 8192, source)
    nested, scaling = modernbert_rope_parameters(d, source), d.get("rope_scaling") or {}
    if not isinstance(scaling, dict):
        raise ValueError(f"{source}: rope_scaling must be an object, got {clipped(scaling)}")
    ropes = {
        kind: rope_from(
            {**scaling, **nested.get(kind, {})},
            config_number(d, key, default, source, float),
            positions,
            f"{source}: rope_parameters.{kind}",
        )
        for kind, key, default in (
            ("full_attention", "global_rope_theta", 160000.0),
            ("sliding_attention", "local_rope_theta", 10000.0),
        )
    }
    attention, mlp = d.get("attention_bias", False), d.get("mlp_bias", False)
    return {
        "hidden_act": d.get("hidden_activation", d.get("hidden_act", "gelu")),
        "layer_norm_eps": config_number(d, "norm_eps", 1e-5, source, float),
        "type_vocab_size": 0,
        "layer_types": tuple(types) if isinstance(types, list) else types,
        "local_attention": config_number(d, "local_attention", 128, source),
        "rope": ropes["full_attention"],
        "local_rope": ropes["sliding_attention"],
        "biases": bias_kinds(
            qkv=attention, attention_output=attention, up=mlp, down=mlp, norm=d.get("norm_bias", False)
        ),
    }


def modernbert_rope_parameters(d: dict, source: str) -> dict[str, dict]:
    """ModernBERT's rope_parameters as transformers 5's ModernBertConfig takes them: an object keyed by layer kind
    (LAYER_TYPES), each an object (a kind left out takes the defaults); anything else it refuses, and so does this."""
    nested = d.get("rope_parameters")
    if nested is None:
        return {}
    if not isinstance(nested, dict):
        raise ValueError(f"{source}: rope_parameters must be an object keyed by layer kind, got {clipped(nested)}")
    unknown = [key for key in nested if key not in LAYER_TYPES]
    if unknown:
        raise ValueError(
            f"{source}: rope_parameters has key {clipped(unknown[0])}; they are keyed by layer kind: "
            f"{', '.join(LAYER_TYPES)} (as transformers 5 reads them)"
        )
    for kind, value in nested.items():
        if not isinstance(value, dict):
            raise ValueError(f"{source}: rope_parameters.{kind} must be an object, got {clipped(value)}")
    return nested


NOMIC_REFUSED = {  # nomic's remote-code options transformers' NomicBertModel does not run
    "prenorm": (False, "post-norm layers"),
    "use_rms_norm": (False, "LayerNorm"),
    "parallel_block": (False, "attention, then the feed-forward"),
    "causal": (False, "a bidirectional encoder"),
    "rotary_emb_interleaved": (False, "the two halves of each head rotate together"),
    "rotary_emb_fraction": (1.0, "the whole head rotates"),
    "rotary_emb_scale_base": (None, "no xPos scaling"),
    "rotary_scaling_factor": (None, "transformers reads rope_parameters, not nomic's dynamic NTK factor"),
}
NOMIC_ACTIVATIONS = {"swiglu": "silu", "geglu": "gelu"}  # nomic's activation_function -> the gate's


def read_nomic_bert(d: dict, source: str) -> dict:
    """NomicBERT's config in its two shapes: the hub's GPT-2 keys (n_embd, n_layer, n_head, n_inner,
    n_positions, rotary_emb_base, activation_function "swiglu", qkv_proj_bias, ...) or transformers 5's. Its
    mixture-of-experts form (nomic-embed-text-v2-moe) is refused: transformers 5 does not implement it."""
    moe = {key: d[key] for key in ("moe_every_n_layers", "num_experts") if d.get(key)}
    if moe:
        raise ValueError(
            f"{source}: a NomicBERT with mixture-of-experts feed-forwards (nomic-embed-text-v2-moe: "
            f"{', '.join(f'{k} {clipped(v)}' for k, v in moe.items())}), which numbert does not run (nor does "
            "transformers 5)"
        )
    if "n_embd" not in d and "n_layer" not in d:
        head_dim = d.get("head_dim")
        hidden, heads = (
            config_number(d, "hidden_size", 768, source),
            config_number(d, "num_attention_heads", 12, source),
        )
        if head_dim is not None and heads and head_dim * heads != hidden:
            raise ValueError(f"{source}: head_dim {clipped(head_dim)} is not hidden_size / num_attention_heads")
        return {"rope": rope_of(d, 1000.0, source), "biases": bias_kinds(norm=True)}
    refuse_options(d, source, NOMIC_REFUSED)
    activation = d.get("activation_function", "swiglu")
    if activation not in NOMIC_ACTIVATIONS:
        raise ValueError(
            f"{source}: activation_function {clipped(activation)}; numbert runs NomicBERT's gated feed-forwards "
            f"{', '.join(NOMIC_ACTIVATIONS)}"
        )
    hidden = config_number(d, "n_embd", 768, source)
    qkv, fc1, fc2 = (bool(d.get(key, False)) for key in ("qkv_proj_bias", "mlp_fc1_bias", "mlp_fc2_bias"))
    positions = config_number(d, "n_positions", 2048, source)
    return {
        "hidden_size": hidden,
        "num_hidden_layers": config_number(d, "n_layer", 12, source),
        "num_attention_heads": config_number(d, "n_head", 12, source),
        "intermediate_size": config_number(d, "n_inner", 4 * hidden, source),
        "max_position_embeddings": positions,
        "layer_norm_eps": config_number(d, "layer_norm_epsilon", 1e-12, source, float),
        "hidden_act": NOMIC_ACTIVATIONS[activation],
        "rope": rope_from({}, config_number(d, "rotary_emb_base", 1000.0, source, float), positions, source),
        "biases": bias_kinds(qkv=qkv, attention_output=qkv, up=fc1, down=fc2, norm=True),
    }


GTE_REFUSED = {  # GTE's remote-code options transformers' GteModel does not run
    "position_embedding_type": ("rope", "rotary positions"),
    "layer_norm_type": ("layer_norm", "LayerNorm"),
    "pack_qkv": (True, "one qkv_proj"),
    "logn_attention_scale": (False, "scores scaled by 1 / sqrt(head_size) only"),
}


def read_gte(d: dict, source: str) -> dict:
    """GTE's config: transformers 5's (model_type "gte", rope_parameters) or Alibaba's remote code's (model_type
    "new", rope_theta and rope_scaling; its "ntk" scaling is refused, as transformers' GteModel fails on it)."""
    refuse_options(d, source, GTE_REFUSED)
    return {
        "rope": rope_of(d, 160000.0, source),
        "position_embedding_type": "rotary",
        "biases": bias_kinds(qkv=True, attention_output=True, down=True, norm=True),
    }


JINA_REFUSED = {
    "rotary_emb_interleaved": (False, "the two halves of each head rotate together"),
    "rotary_emb_scale_base": (None, "no xPos scaling"),
}


def read_jina_embeddings_v3(d: dict, source: str) -> dict:
    """jina-embeddings-v3's config: transformers 5's (model_type "jina_embeddings_v3", rope_parameters), or the
    hub's (model_type "xlm-roberta", position_embedding_type "rotary", rotary_emb_base, and its task LoRA
    adapters: lora_adaptations, lora_rank, lora_alpha, task_instructions, matryoshka_dimensions)."""
    refuse_options(d, source, JINA_REFUSED)
    if d.get("rope_parameters") is not None:
        rope = rope_of(d, 20000.0, source)
    else:
        positions = config_number(d, "max_position_embeddings", 8194, source)
        rope = rope_from({}, config_number(d, "rotary_emb_base", 20000.0, source, float), positions, source)
    adapters = d.get("lora_adaptations") or []
    instructions = d.get("task_instructions") or {}
    dimensions = d.get("matryoshka_dimensions") or []
    if not (
        isinstance(adapters, list) and all(isinstance(a, str) for a in adapters) and len(set(adapters)) == len(adapters)
    ):
        raise ValueError(f"{source}: lora_adaptations must be a list of distinct task names, got {clipped(adapters)}")
    if not (isinstance(instructions, dict) and all(isinstance(v, str) for v in instructions.values())):
        raise ValueError(f"{source}: task_instructions must map task names to texts, got {clipped(instructions)}")
    unknown = sorted(set(instructions) - set(adapters))
    if unknown:
        raise ValueError(f"{source}: task_instructions names tasks lora_adaptations lacks: {clipped(unknown)}")
    if not (isinstance(dimensions, list) and all(isinstance(n, int) and not isinstance(n, bool) for n in dimensions)):
        raise ValueError(f"{source}: matryoshka_dimensions must be a list of integers, got {clipped(dimensions)}")
    return {
        "rope": rope,
        "position_embedding_type": "rotary",
        "task_adapters": tuple(adapters),
        "lora_rank": config_number(d, "lora_rank", 4, source),
        "lora_alpha": config_number(d, "lora_alpha", 1.0, source, float),
        "task_instructions": tuple(instructions.items()),
        "matryoshka_dimensions": tuple(dimensions),
    }


DECODER_REFUSED = {  # options of transformers' Qwen3Model and Gemma3TextModel numbert does not build
    "use_sliding_window": (False, "Qwen3's layers attend to every earlier token"),
    "attn_logit_softcapping": (None, "attention scores are not soft-capped"),
}


def layer_kinds(d: dict, layers: int, default: list[str], source: str) -> tuple[str, ...]:
    """A decoder's layer_types: the config's list (one LAYER_TYPES kind a layer), else `default`."""
    types = d.get("layer_types")
    if types is None:
        types = default
    if not isinstance(types, list) or len(types) != layers:
        count = f"a list of {len(types)}" if isinstance(types, list) else clipped(types)
        raise ValueError(f"{source}: layer_types must name each of the {layers} layers' kind, got {count}")
    return tuple(types)


def gemma3_ropes(d: dict, source: str) -> dict[str, Rope]:
    """Gemma3's rope per layer kind: transformers 5's rope_parameters keyed by layer kind, else the older rope_theta
    and rope_scaling (its global layers) and rope_local_base_freq (its sliding layers)."""
    positions = config_number(d, "max_position_embeddings", 131072, source)
    nested, scaling = modernbert_rope_parameters(d, source), d.get("rope_scaling") or {}
    if not isinstance(scaling, dict):
        raise ValueError(f"{source}: rope_scaling must be an object, got {clipped(scaling)}")
    return {
        kind: rope_from(
            nested.get(kind, scaling if kind == "full_attention" else {}),
            config_number(d, key, default, source, float),
            positions,
            f"{source}: rope_parameters.{kind}",
        )
        for kind, key, default in (
            ("full_attention", "rope_theta", 1000000.0),
            ("sliding_attention", "rope_local_base_freq", 10000.0),
        )
    }


def read_qwen3(d: dict, source: str) -> dict:
    """Qwen3's config (Qwen3-Embedding, Qwen3-Reranker): grouped-query attention (num_key_value_heads), head_dim of
    its own, RMSNorm's rms_norm_eps, rope_theta (or rope_parameters), causal attention; attention_bias on q, k, v and
    o. Sliding windows (use_sliding_window) are refused."""
    refuse_options(d, source, DECODER_REFUSED)
    layers = config_number(d, "num_hidden_layers", 28, source)
    check_sizes({"num_hidden_layers": layers}, source)
    heads = config_number(d, "num_attention_heads", 16, source)
    types = layer_kinds(d, layers, ["full_attention"] * layers, source)
    if "sliding_attention" in types:
        raise ValueError(
            f"{source}: layer_types has sliding_attention layers; numbert runs Qwen3's full attention only"
        )
    bias = d.get("attention_bias", False)
    return {
        "num_key_value_heads": config_number(d, "num_key_value_heads", heads, source),
        "head_dim": config_number(d, "head_dim", 128, source),
        "layer_norm_eps": config_number(d, "rms_norm_eps", 1e-6, source, float),
        "hidden_act": d.get("hidden_act", "silu"),
        "type_vocab_size": 0,
        "layer_types": types,
        "rope": rope_of(d, 1000000.0, source),
        "causal": True,
        "biases": bias_kinds(qkv=bias, attention_output=bias),
    }


def read_gemma3(d: dict, source: str) -> dict:
    """Gemma3's text config (EmbeddingGemma: use_bidirectional_attention): grouped-query attention, head_dim,
    query_pre_attn_scalar (scores scaled by its inverse square root), sliding_window and global layers (layer_types,
    else every sliding_window_pattern-th global), their own rope thetas, hidden_activation. A bidirectional
    sliding-window layer reads keys within sliding_window // 2 either side, as transformers' masks do."""
    refuse_options(d, source, DECODER_REFUSED)
    layers = config_number(d, "num_hidden_layers", 26, source)
    check_sizes({"num_hidden_layers": layers}, source)
    pattern = config_number(d, "sliding_window_pattern", 6, source)
    if pattern < 1:
        raise ValueError(f"{source}: sliding_window_pattern must be at least 1, got {pattern}")
    default = [LAYER_TYPES[bool((i + 1) % pattern)] for i in range(layers)]  # every pattern-th global
    types = layer_kinds(d, layers, default, source)
    ropes = gemma3_ropes(d, source)
    bidirectional = d.get("use_bidirectional_attention") or False
    if not isinstance(bidirectional, bool):
        raise ValueError(f"{source}: use_bidirectional_attention must be true or false, got {clipped(bidirectional)}")
    window = config_number(d, "sliding_window", 4096, source)
    if not bidirectional and "sliding_attention" in types:
        raise ValueError(
            f"{source}: use_bidirectional_attention is false with sliding_attention layers; numbert runs Gemma3's "
            f"sliding windows in both directions only (EmbeddingGemma's)"
        )
    bias = d.get("attention_bias", False)
    return {
        "num_key_value_heads": config_number(d, "num_key_value_heads", 4, source),
        "head_dim": config_number(d, "head_dim", 256, source),
        "layer_norm_eps": config_number(d, "rms_norm_eps", 1e-6, source, float),
        "hidden_act": d.get("hidden_activation", d.get("hidden_act", "gelu_pytorch_tanh")),
        "type_vocab_size": 0,
        "layer_types": types,
        "local_attention": window,
        "rope": ropes["full_attention"],
        "local_rope": ropes["sliding_attention"],
        "causal": not bidirectional,
        "query_pre_attn_scalar": config_number(d, "query_pre_attn_scalar", 256, source, float),
        "biases": bias_kinds(qkv=bias, attention_output=bias),
    }
