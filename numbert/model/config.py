"""The handful of numbers that define a BERT encoder, read from a checkpoint's config.json.

config.json's `model_type` names the member of BERT's family (`FAMILY`: BERT, RoBERTa, XLM-RoBERTa,
DistilBERT, ELECTRA, MPNet, and the modern family: ModernBERT, NomicBERT, GTE, jina-embeddings-v3); each is
BERT's encoder with the few differences its `Member` lists (docs/family.md). DistilBERT names its sizes its
own way (`dim`, `n_layers`, ...), NomicBERT GPT-2's (`n_embd`, `n_layer`, ...): read as BERT's. The modern
family's configs circulate in two shapes, transformers 5's (`layer_types`, `rope_parameters`) and their
authors' remote code's (ModernBERT's `global_rope_theta`, GTE's model type "new", jina's "xlm-roberta" with
rotary positions and LoRA adapters): their readers (numbert.model.config_readers) read both into BertConfig's
fields.

Google's TensorFlow release names the file bert_config.json, with the same keys less three whose
defaults are BERT's own: layer_norm_eps (1e-12), pad_token_id (0) and model_type (bert). Its
`"hidden_act": "gelu"` is evaluated as transformers evaluates it when it converts such a checkpoint,
in the exact erf form, 0.5 x (1 + erf(x / sqrt 2)), not the tanh approximation Google's modeling.py
computes (the two differ by up to about 1e-3 per activation).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .config_readers import (  # the members' readers, and the checks BertConfig shares with them
    BIASES,
    LAYER_TYPES,
    SIZE_LIMITS,
    check_sizes,
    clipped,
    read_gemma3,
    read_gte,
    read_jina_embeddings_v3,
    read_modernbert,
    read_nomic_bert,
    read_qwen3,
)
from .layers import ACTIVATIONS, RELATIVE_BUCKETS  # the hidden_act names numbert runs, each with its function
from .rotary import Rope

CONFIG_FILES = ("config.json", "bert_config.json")  # transformers', then Google's TensorFlow release's
# Google's release folders, as google-research/bert's validate_case_matches_checkpoint names them, by casing
GOOGLE_RELEASE = re.compile(
    r"(?P<casing>uncased|cased|multi_cased|multilingual|chinese|wwm_uncased|wwm_cased)"
    r"_L-\d+_H-\d+_A-\d+"
)


@dataclass(frozen=True)
class Member:
    """What one member of BERT's family changes in BERT's encoder (docs/family.md has the why)."""

    name: str  # transformers' class names start with it: RobertaModel, RobertaForMaskedLM, ...
    prefix: str  # the encoder's tensors' prefix in a task model's checkpoint: roberta.embeddings...
    positions_past_padding: bool = False  # RoBERTa's rule: position ids count from pad_token_id + 1, not 0
    token_types: bool | None = True  # a token_type_embeddings table (DistilBERT and MPNet have none); None: as
    # its config's type_vocab_size says (GTE: gte-base-en-v1.5 has none)
    relative_attention: bool = False  # MPNet: a learned bias per head and relative distance on every layer's scores
    config_keys: tuple[tuple[str, str], ...] = ()  # its own config.json names -> BERT's
    # the modern family
    rotary: bool = False  # positions rotate each query and key (numbert.model.rotary); no position table
    pre_norm: bool = False  # ModernBERT: LayerNorm before attention and feed-forward (none before layer 0's
    # attention), a final LayerNorm after the last layer; BERT normalises after each
    glu: str | None = None  # a gated feed-forward, activation(x W_gate) * (x W_up): "gate_first" (one Linear, its
    # first half the gate: ModernBERT's Wi), "up_first" (GTE's up_gate_proj), "two" (NomicBERT's fc11 and fc12)
    defaults: tuple[tuple[str, object], ...] = ()  # transformers' defaults for its config, where they are not BERT's
    read_config: Callable[[dict, str], dict] | None = dataclasses.field(
        default=None, compare=False, repr=False
    )  # its own
    # config shapes -> BertConfig's fields (MODERN_READERS)
    decoder: str | None = None  # a decoder-shaped embedder (numbert.model.decoder, DECODERS): "qwen3" (RMSNorm x w,
    # causal) or "gemma3" (RMSNorm x (1 + w), four norms a layer, embeddings times sqrt(hidden))


DECODERS = ("qwen3", "gemma3")  # Member.decoder's kinds
# BertConfig's fields read from a decoder's config alone (NomicBERT's config.json has a head_dim and causal too)
DECODER_FIELDS = ("num_key_value_heads", "head_dim", "causal", "query_pre_attn_scalar")


GTE = Member(  # transformers' GteModel
    "Gte",
    "gte.",
    token_types=None,
    rotary=True,
    glu="up_first",
    defaults=(
        ("vocab_size", 250048),
        ("max_position_embeddings", 8192),
        ("type_vocab_size", 1),
        ("pad_token_id", 1),
    ),
    read_config=read_gte,
)

FAMILY = {  # config.json's model_type -> how that member of the family differs from BERT
    "bert": Member("Bert", "bert."),
    "roberta": Member("Roberta", "roberta.", positions_past_padding=True),
    "xlm-roberta": Member("XLMRoberta", "roberta.", positions_past_padding=True),
    "distilbert": Member(
        "DistilBert",
        "distilbert.",
        token_types=False,
        config_keys=(
            ("dim", "hidden_size"),
            ("n_layers", "num_hidden_layers"),
            ("n_heads", "num_attention_heads"),
            ("hidden_dim", "intermediate_size"),
            ("activation", "hidden_act"),
        ),
    ),
    "electra": Member("Electra", "electra."),  # and embeddings of embedding_size, projected to hidden_size
    "mpnet": Member("MPNet", "mpnet.", positions_past_padding=True, token_types=False, relative_attention=True),
    # the modern family: rotary positions, gated feed-forwards, ModernBERT's pre-norm and sliding windows
    "modernbert": Member(
        "ModernBert",
        "model.",
        token_types=False,
        rotary=True,
        pre_norm=True,
        glu="gate_first",
        defaults=(
            ("vocab_size", 50368),
            ("intermediate_size", 1152),
            ("num_hidden_layers", 22),
            ("max_position_embeddings", 8192),
            ("pad_token_id", 50283),
        ),
        read_config=read_modernbert,
    ),
    "nomic_bert": Member(
        "NomicBert",
        "nomic_bert.",
        rotary=True,
        glu="two",
        defaults=(("vocab_size", 30528), ("max_position_embeddings", 2048), ("hidden_act", "silu")),
        read_config=read_nomic_bert,
    ),
    "gte": GTE,
    # GTE as Alibaba's remote code names it (gte-base-en-v1.5, gte-multilingual-base: NewModel)
    "new": dataclasses.replace(GTE, name="New", prefix="new."),
    "jina_embeddings_v3": Member(
        "JinaEmbeddingsV3",
        "roberta.",
        rotary=True,
        defaults=(
            ("vocab_size", 250002),
            ("hidden_size", 1024),
            ("num_hidden_layers", 24),
            ("num_attention_heads", 16),
            ("intermediate_size", 4096),
            ("max_position_embeddings", 8194),
            ("type_vocab_size", 1),
            ("layer_norm_eps", 1e-5),
            ("pad_token_id", 1),
        ),
        read_config=read_jina_embeddings_v3,
    ),
    # decoder-shaped embedders (numbert.model.decoder): pre-norm RMSNorm layers, grouped-query attention
    "qwen3": Member(
        "Qwen3",
        "model.",
        token_types=False,
        rotary=True,
        pre_norm=True,
        glu="two",
        defaults=(("vocab_size", 151936), ("max_position_embeddings", 32768), ("hidden_act", "silu")),
        read_config=read_qwen3,
        decoder="qwen3",
    ),
    "gemma3_text": Member(
        "Gemma3Text",
        "model.",
        token_types=False,
        rotary=True,
        pre_norm=True,
        glu="two",
        defaults=(("vocab_size", 262208), ("max_position_embeddings", 131072)),
        read_config=read_gemma3,
        decoder="gemma3",
    ),
}


def model_type_of(d: dict, source: str) -> str:
    """config.json's model_type, else the family member its first architecture names (RobertaModel: roberta),
    else BERT (Google's bert_config.json has neither); one numbert does not run is refused, naming it."""
    model_type = d.get("model_type")
    if model_type == "gemma3" and isinstance(d.get("text_config"), dict):
        model_type = "gemma3_text"  # Gemma3ForConditionalGeneration's config: its text model's, nested
    if model_type == "xlm-roberta" and d.get("position_embedding_type") == "rotary":
        model_type = "jina_embeddings_v3"  # the hub's jina-embeddings-v3 (XLMRobertaLoRA) names itself XLM-R
    if model_type is None:
        architectures = d.get("architectures")
        first = architectures[0] if isinstance(architectures, list) and architectures else ""
        by_length = sorted(FAMILY.items(), key=lambda item: -len(item[1].name))  # XLMRoberta before Roberta
        model_type = next((t for t, r in by_length if str(first).startswith(r.name)), "bert")
    if not isinstance(model_type, str) or model_type not in FAMILY:
        raise ValueError(
            f"{source}: model_type {model_type!r} is not a BERT encoder numbert runs; it runs {', '.join(FAMILY)}"
        )
    return model_type


def config_file(directory: str | Path) -> Path:
    """The config file of the model in `directory`: config.json, else Google's bert_config.json."""
    directory = Path(directory)
    for name in CONFIG_FILES:
        if (directory / name).is_file():
            return directory / name
    raise FileNotFoundError(f"no config.json at {directory / CONFIG_FILES[0]} (nor Google's {CONFIG_FILES[1]})")


def google_release_lowercases(directory: str | Path) -> bool | None:
    """Whether the Google release in `directory` was trained on lowercased text, read from its folder
    name as Google's run_classifier.py checks --do_lower_case (uncased_L-12_H-768_A-12: yes,
    cased_L-12_H-768_A-12: no); None for a folder not named like a release."""
    match = GOOGLE_RELEASE.fullmatch(Path(directory).resolve().name)
    return None if match is None else match["casing"] not in ("cased", "multi_cased", "wwm_cased")


@dataclass(frozen=True)
class BertConfig:
    """Hyper-parameters of a BERT encoder. The defaults are bert-base-uncased."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    pad_token_id: int = 0
    position_embedding_type: str = "absolute"
    model_type: str = "bert"  # the member of BERT's family: a key of FAMILY
    embedding_size: int | None = None  # ELECTRA: embeddings this wide, projected to hidden_size; None: hidden_size
    relative_attention_num_buckets: int = 32  # MPNet: rows of its relative position bias
    # the modern family (docs/family.md); BERT's are these defaults
    rope: Rope | None = None  # rotary positions (Member.rotary): every layer's, or ModernBERT's full-attention ones'
    local_rope: Rope | None = None  # ModernBERT: its sliding-window layers' (None: `rope`)
    layer_types: tuple[str, ...] = ()  # each layer's LAYER_TYPES kind (ModernBERT); (): every layer full attention
    local_attention: int = 128  # a sliding-window layer's keys lie within local_attention // 2 of the query
    biases: tuple[str, ...] = BIASES  # the kinds of Linear and LayerNorm that carry a bias (ModernBERT's: none)
    task_adapters: tuple[str, ...] = ()  # jina-embeddings-v3: its LoRA adapters' tasks (lora_adaptations), in order
    lora_rank: int = 4  # their rank,
    lora_alpha: float = 1.0  # and alpha: each adapted weight is W + (alpha / rank) B A
    task_instructions: tuple[tuple[str, str], ...] = ()  # jina: the text its encode prepends for each task
    matryoshka_dimensions: tuple[int, ...] = ()  # jina: the widths its vectors may be cut to
    # decoder-shaped embedders (Member.decoder: Qwen3, Gemma3); None / False for the others
    num_key_value_heads: int | None = None  # grouped-query attention: key/value heads, each shared by a group of
    # query heads; None: one per query head
    head_dim: int | None = None  # a head's width where it is not hidden_size / num_attention_heads
    causal: bool = False  # Qwen3: each token attends to itself and the tokens before it only
    query_pre_attn_scalar: float | None = None  # Gemma3: scores scaled by its inverse square root, not head_dim's

    def __post_init__(self):
        where = "BertConfig"
        if not isinstance(self.model_type, str) or self.model_type not in FAMILY:
            raise ValueError(f"{where}: unknown model_type {self.model_type!r}; numbert runs {', '.join(FAMILY)}")
        if self.embedding_size is not None and (
            not isinstance(self.embedding_size, int) or isinstance(self.embedding_size, bool) or self.embedding_size < 1
        ):
            raise ValueError(f"{where}: embedding_size must be a positive integer, got {self.embedding_size!r}")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.type == "int" and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"{where}: {field.name} must be an integer, got {value!r}")
            if field.type == "float" and (not isinstance(value, (int, float)) or isinstance(value, bool)):
                raise ValueError(f"{where}: {field.name} must be a number, got {value!r}")
            if field.type == "str" and not isinstance(value, str):
                raise ValueError(f"{where}: {field.name} must be a string, got {value!r}")
        check_sizes(vars(self), where)
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "relative_attention_num_buckets",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{where}: {name} must be at least 1, got {getattr(self, name)}")
        if self.member.relative_attention and self.relative_attention_num_buckets < RELATIVE_BUCKETS:
            raise ValueError(
                f"{where}: relative_attention_num_buckets is {self.relative_attention_num_buckets}, but "
                f"{self.model_type} reads {RELATIVE_BUCKETS} buckets of its relative position bias "
                f"(encoder.relative_attention_bias.weight, a row a bucket, as transformers reads it): at least "
                f"{RELATIVE_BUCKETS}"
            )
        token_types = self.member.token_types
        if self.type_vocab_size < 0 or (token_types is not None and (self.type_vocab_size >= 1) != token_types):
            has = "has no token types: 0" if not token_types else "has token types: at least 1"
            raise ValueError(f"{where}: type_vocab_size is {self.type_vocab_size}; {self.model_type} {has}")
        if self.max_tokens < 1:
            raise ValueError(
                f"{where}: max_position_embeddings {self.max_position_embeddings} leaves no position past "
                f"the padding index {self.pad_token_id}"
            )
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"{where}: pad_token_id {self.pad_token_id} is not an id of the vocabulary (0 to {self.vocab_size - 1})"
            )
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"{where}: hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"{where}: unsupported hidden_act {self.hidden_act!r}; numbert runs {', '.join(ACTIVATIONS)}"
            )
        positions = "rotary" if self.member.rotary else "absolute"
        if self.position_embedding_type != positions:
            raise ValueError(
                f"{where}: unsupported position_embedding_type "
                f"{self.position_embedding_type!r}; numbert runs {positions} positions only for {self.model_type}"
            )
        self._check_modern(where)
        self._check_decoder(where)
        float32 = np.finfo(np.float32)  # LayerNorm adds eps in float32, where 1e-50 is 0 and 1e308 infinite
        if not float(float32.smallest_subnormal) <= self.layer_norm_eps <= float(float32.max):
            raise ValueError(
                f"{where}: layer_norm_eps must be positive and finite in float32 (1e-45 to 3e38), "
                f"got {self.layer_norm_eps!r}"
            )

    def _check_modern(self, where: str) -> None:
        """The modern family's fields: a rope exactly where positions rotate, layer kinds, biases, adapters."""
        rotary = self.member.rotary
        if rotary != (self.rope is not None) or (self.local_rope is not None and not rotary):
            raise ValueError(f"{where}: {self.model_type} {'needs' if rotary else 'has no'} rotary positions (rope)")
        for name in ("rope", "local_rope"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), Rope):
                raise ValueError(f"{where}: {name} must be a Rope, got {getattr(self, name)!r}")
        if self.head_size % 2 and rotary:
            raise ValueError(
                f"{where}: rotary positions rotate pairs of a head's numbers; head size {self.head_size} is odd"
            )
        types = self.layer_types
        if not isinstance(types, tuple) or (types and len(types) != self.num_hidden_layers):
            raise ValueError(
                f"{where}: layer_types must name each of the {self.num_hidden_layers} layers' kind, "
                f"got {clipped(types)}"
            )
        unknown = [t for t in types if t not in LAYER_TYPES]
        if unknown:
            raise ValueError(
                f"{where}: unknown layer type {clipped(unknown[0])}; numbert runs {', '.join(LAYER_TYPES)}"
            )
        if "sliding_attention" in types and not rotary:
            raise ValueError(f"{where}: sliding-window layers need rotary positions ({self.model_type} has none)")
        if self.local_attention < 2:
            raise ValueError(f"{where}: local_attention must be at least 2 tokens, got {self.local_attention}")
        if not isinstance(self.biases, tuple) or not set(self.biases) <= set(BIASES):
            raise ValueError(f"{where}: biases must name kinds among {', '.join(BIASES)}, got {self.biases!r}")
        adapters = self.task_adapters
        if not isinstance(adapters, tuple) or not all(isinstance(a, str) for a in adapters):
            raise ValueError(f"{where}: task_adapters must be task names, got {adapters!r}")
        float32 = float(np.finfo(np.float32).max)
        if adapters and (self.lora_rank < 1 or not 0 < abs(self.lora_alpha) / max(self.lora_rank, 1) <= float32):
            raise ValueError(
                f"{where}: LoRA adapters need lora_rank >= 1 and a lora_alpha whose scale alpha / rank is non-zero and "
                f"finite in float32 (at most 3.4e38), got lora_rank {self.lora_rank}, lora_alpha {self.lora_alpha!r}"
            )
        for n in self.matryoshka_dimensions:
            if not 1 <= n <= self.hidden_size:
                raise ValueError(
                    f"{where}: matryoshka dimension {n} is not between 1 and hidden_size {self.hidden_size}"
                )

    def _check_decoder(self, where: str) -> None:
        """The decoder-shaped embedders' fields: a head width, key/value heads dividing the query heads, a causal
        mask and Gemma's query scalar only where the member is a decoder."""
        decoder = self.member.decoder is not None
        if not decoder and (
            self.num_key_value_heads is not None
            or self.head_dim is not None
            or self.causal
            or self.query_pre_attn_scalar is not None
        ):
            raise ValueError(
                f"{where}: num_key_value_heads, head_dim, causal and query_pre_attn_scalar are decoder-shaped "
                f"embedders' (Qwen3, Gemma3), not {self.model_type}'s"
            )
        if not decoder:
            return
        for name in ("num_key_value_heads", "head_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= SIZE_LIMITS["hidden_size"]:
                raise ValueError(
                    f"{where}: {name} must be an integer from 1 to {SIZE_LIMITS['hidden_size']}, got {value!r}"
                )
        assert self.num_key_value_heads is not None
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"{where}: num_attention_heads {self.num_attention_heads} is not a multiple of num_key_value_heads "
                f"{self.num_key_value_heads} (each key/value head serves a group of query heads)"
            )
        scalar = self.query_pre_attn_scalar
        if scalar is not None and (
            isinstance(scalar, bool)
            or not isinstance(scalar, (int, float))
            or not 0 < scalar < float(np.finfo(np.float32).max)
        ):
            raise ValueError(f"{where}: query_pre_attn_scalar must be a positive finite number, got {scalar!r}")
        if not isinstance(self.causal, bool):
            raise ValueError(f"{where}: causal must be true or false, got {self.causal!r}")

    @property
    def head_size(self) -> int:
        """A head's width: head_dim where the config sets it (Qwen3, Gemma3), else hidden_size / heads."""
        return self.head_dim if self.head_dim is not None else self.hidden_size // self.num_attention_heads

    @property
    def key_value_heads(self) -> int:
        """The key/value heads: num_key_value_heads (grouped-query attention), else one per query head."""
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def attention_scale(self) -> float:
        """What each score q . k is multiplied by: 1 / sqrt(query_pre_attn_scalar) (Gemma3), else 1 / sqrt(head)."""
        return (self.query_pre_attn_scalar or self.head_size) ** -0.5

    @property
    def member(self) -> Member:
        """How this family member differs from BERT."""
        return FAMILY[self.model_type]

    @property
    def embedding_width(self) -> int:
        """The width of the embedding tables: embedding_size (ELECTRA), else hidden_size."""
        return self.hidden_size if self.embedding_size is None else self.embedding_size

    @property
    def max_tokens(self) -> int:
        """The longest input: one token per position, less the positions up to the padding index for RoBERTa's rule
        (RoBERTa's 514 positions take 512 tokens)."""
        offset = self.pad_token_id + 1 if self.member.positions_past_padding else 0
        return self.max_position_embeddings - offset

    @property
    def window(self) -> int:
        """A sliding-window layer's keys lie within this many tokens of the query, either side (ModernBERT: 64)."""
        return self.local_attention // 2

    def layer_type(self, layer: int) -> str:
        """The LAYER_TYPES kind of layer `layer` (0-based): full attention unless layer_types says otherwise."""
        return self.layer_types[layer] if self.layer_types else "full_attention"

    def layer_rope(self, layer: int) -> Rope | None:
        """The rotary embedding of layer `layer`: local_rope on sliding-window layers if set, else rope."""
        sliding = self.layer_type(layer) == "sliding_attention"
        return self.local_rope if sliding and self.local_rope is not None else self.rope

    @classmethod
    def from_dict(cls, d: dict, source: str = "config") -> BertConfig:
        """The config of a checkpoint of BERT's family (FAMILY); other architectures are refused."""
        model_type = model_type_of(d, source)
        if model_type == "gemma3_text" and d.get("model_type") == "gemma3":
            d, source = d["text_config"], f"{source}: text_config"
        member = FAMILY[model_type]
        d = {**d, **{key: value for key, value in member.defaults if d.get(key) is None}}
        d = {**d, **{bert: d[own] for own, bert in member.config_keys if own in d}, "model_type": model_type}
        check_sizes(d, source)  # before a reader builds anything from them
        if member.read_config is not None:
            try:
                d |= member.read_config(d, source) | {"position_embedding_type": "rotary"}
            except (TypeError, KeyError) as e:  # a field of the wrong kind deep in its rope or layer settings
                raise ValueError(f"{source}: {model_type} config is malformed ({clipped(e, 200)})") from None
        if member.token_types is False:
            d["type_vocab_size"] = 0
        for flag in ("is_decoder", "add_cross_attention"):
            if d.get(flag):
                raise ValueError(
                    f"{source}: {flag} is set; numbert runs BERT as a bidirectional encoder "
                    f"only (no causal mask, no cross-attention)"
                )
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known and (member.decoder or k not in DECODER_FIELDS)}
        if values.get("pad_token_id") is None:
            values.pop("pad_token_id", None)
        try:
            return cls(**values)
        except ValueError as e:
            raise ValueError(str(e).replace("BertConfig", source, 1)) from None

    def to_dict(self) -> dict:
        """The config as config.json writes it; the modern family's in transformers 5's shape (rope_parameters,
        layer_types), which both numbert and transformers read back."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in MODERN_FIELDS}
        if self.embedding_size is None:
            del fields["embedding_size"]
        if not self.member.relative_attention:
            del fields["relative_attention_num_buckets"]
        fields = fields | {"architectures": [f"{self.member.name}Model"]}
        if not self.member.rotary:
            return fields
        assert self.rope is not None  # __post_init__ checked it
        del fields["position_embedding_type"]
        fields["rope_parameters"] = self.rope.to_dict()
        if self.model_type == "modernbert":
            local = self.local_rope or self.rope
            fields |= {
                "hidden_activation": fields.pop("hidden_act"),
                "norm_eps": fields.pop("layer_norm_eps"),
                "layer_types": list(self.layer_types) or ["full_attention"] * self.num_hidden_layers,
                "local_attention": self.local_attention,
                "rope_parameters": {"full_attention": self.rope.to_dict(), "sliding_attention": local.to_dict()},
                "attention_bias": "qkv" in self.biases,
                "mlp_bias": "up" in self.biases,
                "norm_bias": "norm" in self.biases,
            }
        if self.member.decoder is not None:
            fields |= self._decoder_dict()
        if self.task_adapters:  # jina-embeddings-v3's adapters, by the hub's names
            fields |= {
                "lora_adaptations": list(self.task_adapters),
                "lora_rank": self.lora_rank,
                "lora_alpha": self.lora_alpha,
                "task_instructions": dict(self.task_instructions),
            }
        if self.matryoshka_dimensions:
            fields["matryoshka_dimensions"] = list(self.matryoshka_dimensions)
        return fields

    def _decoder_dict(self) -> dict:
        """A decoder-shaped embedder's own config.json fields, as transformers 5's Qwen3Config / Gemma3TextConfig
        write them."""
        assert self.rope is not None
        fields = {
            "num_key_value_heads": self.key_value_heads,
            "head_dim": self.head_size,
            "rms_norm_eps": self.layer_norm_eps,
            "layer_types": list(self.layer_types) or ["full_attention"] * self.num_hidden_layers,
            "attention_bias": "qkv" in self.biases,
        }
        if self.member.decoder == "qwen3":
            return fields | {"rope_parameters": self.rope.to_dict(), "use_sliding_window": False}
        local = self.local_rope or self.rope
        return fields | {
            "hidden_activation": self.hidden_act,
            "query_pre_attn_scalar": self.query_pre_attn_scalar,
            "sliding_window": self.local_attention,
            "use_bidirectional_attention": not self.causal,
            "rope_parameters": {"full_attention": self.rope.to_dict(), "sliding_attention": local.to_dict()},
        }


MODERN_FIELDS = (  # BertConfig's fields of the modern family, written by to_dict in their own configs' names
    "num_key_value_heads",
    "head_dim",
    "causal",
    "query_pre_attn_scalar",
    "rope",
    "local_rope",
    "layer_types",
    "local_attention",
    "biases",
    "task_adapters",
    "lora_rank",
    "lora_alpha",
    "task_instructions",
    "matryoshka_dimensions",
)
