"""What a sentence-transformers model directory says about turning token vectors into one sentence vector.

A sentence-transformers model is a BERT checkpoint plus a pipeline described in `modules.json`:

    [{"path": "",           "type": "sentence_transformers.models.Transformer"},   # BERT itself
     {"path": "1_Pooling",  "type": "sentence_transformers.models.Pooling"},       # token vectors -> one vector
     {"path": "2_Normalize","type": "sentence_transformers.models.Normalize"}]     # L2 normalisation

The Pooling module's `config.json` names its modes either by flags (`pooling_mode_mean_tokens`: true, ...)
or, since sentence-transformers 5, by one `pooling_mode` string or list; several modes are
concatenated. `sentence_bert_config.json` holds `max_seq_length` (inputs are cut to that many
tokens, [CLS] and [SEP] included) and `do_lower_case` (lowercase the text before tokenizing).
The pooling always runs over the LAST layer's token vectors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# sentence-transformers' pooling modes, in the order it concatenates flagged modes, and numbert's names.
POOLING_MODES = {
    "cls": "cls",
    "max": "max",
    "mean": "mean",
    "mean_sqrt_len_tokens": "mean_sqrt_len",
    "weightedmean": "weighted_mean",
    "lasttoken": "sep",
}
POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


@dataclass(frozen=True)
class SentenceConfig:
    """The sentence-transformers recipe of a model directory, in numbert's terms."""

    pooling: tuple[str, ...] = ("mean",)  # numbert pooling names, concatenated in this order
    normalize: bool = False  # a Normalize module follows the pooling
    max_seq_length: int | None = None  # tokens per input, [CLS] and [SEP] included
    do_lower_case: bool = False  # lowercase texts before tokenizing
    unsupported: tuple[str, ...] = ()  # modules numbert does not run (Dense, LayerNorm, ...), as "path (Type)"


def read_sentence_config(directory: str | Path) -> SentenceConfig | None:
    """The SentenceConfig of a sentence-transformers directory, or None for a plain BERT directory."""
    directory = Path(directory)
    modules_file = directory / "modules.json"
    if not modules_file.is_file():
        return None
    modules = _read_json(modules_file)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ValueError(f"{modules_file}: expected a list of modules, each an object with 'path' and 'type'")
    pooling, normalize, unsupported = ("mean",), False, []
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        path = module.get("path", "")
        if not isinstance(path, str):
            raise ValueError(f"{modules_file}: a module's 'path' must be a string, got {path!r}")
        if kind == "Pooling":
            pooling = _pooling_modes(directory / path / "config.json")
        elif kind == "Normalize":
            normalize = True
        elif kind != "Transformer":
            unsupported.append(f"{path or '.'} ({kind or 'unknown type'})")
    settings_file = directory / "sentence_bert_config.json"
    settings = _read_object(settings_file) if settings_file.is_file() else {}
    max_seq_length = settings.get("max_seq_length")
    if max_seq_length is not None and (not isinstance(max_seq_length, int) or max_seq_length < 2):
        raise ValueError(f"{settings_file}: max_seq_length must be an integer >= 2, got {max_seq_length!r}")
    return SentenceConfig(pooling, normalize, max_seq_length, bool(settings.get("do_lower_case", False)),
                          tuple(unsupported))


def _pooling_modes(config_file: Path) -> tuple[str, ...]:
    """The Pooling module's modes as numbert pooling names; sentence-transformers' default is mean."""
    if not config_file.is_file():
        return ("mean",)
    config = _read_object(config_file)
    modes = config.get("pooling_mode")
    if modes is None:
        modes = [mode for flag, mode in POOLING_FLAGS.items() if config.get(flag)] or ["mean"]
    modes = [modes] if isinstance(modes, str) else modes
    if not (isinstance(modes, list) and all(isinstance(m, str) for m in modes)):
        raise ValueError(f"{config_file}: pooling_mode must be a string or a list of strings, got {modes!r}")
    unknown = [m for m in modes if m not in POOLING_MODES]
    if unknown:
        raise ValueError(f"{config_file}: unknown pooling mode {unknown[0]!r}; sentence-transformers defines "
                         f"{', '.join(POOLING_MODES)}")
    return tuple(POOLING_MODES[m] for m in modes)


def _read_object(path: Path) -> dict:
    """A JSON file that must hold an object."""
    value = _read_json(path)
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object, got a {type(value).__name__}")
    return value


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read it as JSON ({e})") from None
