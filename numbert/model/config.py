"""The handful of numbers that define a BERT encoder, read from a checkpoint's config.json.

config.json's `model_type` names the member of BERT's family (`FAMILY`: BERT, RoBERTa, XLM-RoBERTa,
DistilBERT, ELECTRA, MPNet); each is BERT's encoder with the few differences its `Relative` lists
(docs/family.md). DistilBERT names its sizes its own way (`dim`, `n_layers`, ...): read as BERT's.

Google's TensorFlow release names the file bert_config.json, with the same keys less three whose
defaults are BERT's own: layer_norm_eps (1e-12), pad_token_id (0) and model_type (bert). Its
`"hidden_act": "gelu"` is evaluated as transformers evaluates it when it converts such a checkpoint,
in the exact erf form, 0.5 x (1 + erf(x / sqrt 2)), not the tanh approximation Google's modeling.py
computes (the two differ by up to about 1e-3 per activation).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .layers import ACTIVATIONS, RELATIVE_BUCKETS  # the hidden_act names numbert runs, each with its function

CONFIG_FILES = ("config.json", "bert_config.json")  # transformers', then Google's TensorFlow release's
# Google's release folders, as google-research/bert's validate_case_matches_checkpoint names them, by casing
GOOGLE_RELEASE = re.compile(
    r"(?P<casing>uncased|cased|multi_cased|multilingual|chinese|wwm_uncased|wwm_cased)"
    r"_L-\d+_H-\d+_A-\d+"
)


@dataclass(frozen=True)
class Relative:
    """What one member of BERT's family changes in BERT's encoder (docs/family.md has the why)."""

    name: str  # transformers' class names start with it: RobertaModel, RobertaForMaskedLM, ...
    prefix: str  # the encoder's tensors' prefix in a task model's checkpoint: roberta.embeddings...
    positions_past_padding: bool = False  # RoBERTa's rule: position ids count from pad_token_id + 1, not 0
    token_types: bool = True  # a token_type_embeddings table (DistilBERT and MPNet have none)
    relative_attention: bool = False  # MPNet: a learned bias per head and relative distance on every layer's scores
    config_keys: tuple[tuple[str, str], ...] = ()  # its own config.json names -> BERT's


FAMILY = {  # config.json's model_type -> how that relative differs from BERT
    "bert": Relative("Bert", "bert."),
    "roberta": Relative("Roberta", "roberta.", positions_past_padding=True),
    "xlm-roberta": Relative("XLMRoberta", "roberta.", positions_past_padding=True),
    "distilbert": Relative(
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
    "electra": Relative("Electra", "electra."),  # and embeddings of embedding_size, projected to hidden_size
    "mpnet": Relative("MPNet", "mpnet.", positions_past_padding=True, token_types=False, relative_attention=True),
}


def model_type_of(d: dict, source: str) -> str:
    """config.json's model_type, else the family member its first architecture names (RobertaModel: roberta),
    else BERT (Google's bert_config.json has neither); one numbert does not run is refused, naming it."""
    model_type = d.get("model_type")
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
        if self.relative.relative_attention and self.relative_attention_num_buckets < RELATIVE_BUCKETS:
            raise ValueError(
                f"{where}: relative_attention_num_buckets is {self.relative_attention_num_buckets}, but "
                f"{self.model_type} reads {RELATIVE_BUCKETS} buckets of its relative position bias "
                f"(encoder.relative_attention_bias.weight, a row a bucket, as transformers reads it): at least "
                f"{RELATIVE_BUCKETS}"
            )
        if self.type_vocab_size < 0 or (self.type_vocab_size >= 1) != self.relative.token_types:
            has = "has no token types: 0" if not self.relative.token_types else "has token types: at least 1"
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
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"{where}: hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"{where}: unsupported hidden_act {self.hidden_act!r}; numbert runs {', '.join(ACTIVATIONS)}"
            )
        if self.position_embedding_type != "absolute":
            raise ValueError(
                f"{where}: unsupported position_embedding_type "
                f"{self.position_embedding_type!r}; numbert runs absolute positions only"
            )
        float32 = np.finfo(np.float32)  # LayerNorm adds eps in float32, where 1e-50 is 0 and 1e308 infinite
        if not float(float32.smallest_subnormal) <= self.layer_norm_eps <= float(float32.max):
            raise ValueError(
                f"{where}: layer_norm_eps must be positive and finite in float32 (1e-45 to 3e38), "
                f"got {self.layer_norm_eps!r}"
            )

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def relative(self) -> Relative:
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
        offset = self.pad_token_id + 1 if self.relative.positions_past_padding else 0
        return self.max_position_embeddings - offset

    @classmethod
    def from_dict(cls, d: dict, source: str = "config") -> BertConfig:
        """The config of a checkpoint of BERT's family (FAMILY); other architectures are refused."""
        model_type = model_type_of(d, source)
        relative = FAMILY[model_type]
        d = {**d, **{bert: d[own] for own, bert in relative.config_keys if own in d}, "model_type": model_type}
        if not relative.token_types:
            d["type_vocab_size"] = 0
        for flag in ("is_decoder", "add_cross_attention"):
            if d.get(flag):
                raise ValueError(
                    f"{source}: {flag} is set; numbert runs BERT as a bidirectional encoder "
                    f"only (no causal mask, no cross-attention)"
                )
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        if values.get("pad_token_id") is None:
            values.pop("pad_token_id", None)
        try:
            return cls(**values)
        except ValueError as e:
            raise ValueError(str(e).replace("BertConfig", source, 1)) from None

    @classmethod
    def from_json(cls, path: str | Path) -> BertConfig:
        """The config in a checkpoint's config.json; every error names the file."""
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"no config.json at {path}") from None
        except (ValueError, RecursionError) as e:  # bad JSON or UTF-8, a number of 4300 digits, nesting too deep
            raise ValueError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(d, dict):
            raise ValueError(f"{path} must hold a JSON object")
        return cls.from_dict(d, source=str(path))

    def to_dict(self) -> dict:
        fields = dataclasses.asdict(self)
        if self.embedding_size is None:
            del fields["embedding_size"]
        if not self.relative.relative_attention:
            del fields["relative_attention_num_buckets"]
        return fields | {"architectures": [f"{self.relative.name}Model"]}
