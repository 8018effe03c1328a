"""The handful of numbers that define a BERT encoder, read from a checkpoint's config.json.

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

from .layers import ACTIVATIONS  # the hidden_act names numbert runs, each with its function

CONFIG_FILES = ("config.json", "bert_config.json")  # transformers', then Google's TensorFlow release's
# Google's release folders, as google-research/bert's validate_case_matches_checkpoint names them, by casing
GOOGLE_RELEASE = re.compile(
    r"(?P<casing>uncased|cased|multi_cased|multilingual|chinese|wwm_uncased|wwm_cased)"
    r"_L-\d+_H-\d+_A-\d+"
)


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

    def __post_init__(self):
        where = "BertConfig"
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
            "type_vocab_size",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{where}: {name} must be at least 1, got {getattr(self, name)}")
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

    @classmethod
    def from_dict(cls, d: dict, source: str = "config") -> BertConfig:
        """The config of a BERT-architecture checkpoint; other architectures are refused."""
        model_type = d.get("model_type", "bert")
        if model_type != "bert":
            raise ValueError(f"{source}: model_type {model_type!r} is not BERT; numbert runs BERT encoders only")
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
        return dataclasses.asdict(self) | {"model_type": "bert", "architectures": ["BertModel"]}
