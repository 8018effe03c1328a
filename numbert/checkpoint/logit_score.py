"""A CrossEncoder's LogitScore module (sentence-transformers 6): the vocabulary ids whose next-token logits score a
pair on a causal language model, score = logit(true) - logit(false), or logit(true) alone when false_token_id is
null. Its config.json is in the folder modules.json lists for it (1_LogitScore).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from .json_file import read_object
from .sentence_config import Modules


class LogitScore(NamedTuple):
    """The token ids a causal-LM reranker's score reads."""

    true_token_id: int
    false_token_id: int | None  # None: the score is the true token's logit alone


def read_logit_score(directory: Path, listed: Modules) -> LogitScore | None:
    """The LogitScore module modules.json lists (`listed`: listed_modules' answer), or None without one."""
    path = next((path for path, kind in listed or [] if kind == "LogitScore"), None)
    if path is None:
        return None
    config_file = directory / path / "config.json"
    config = read_object(config_file)
    ids = {}
    for key in ("true_token_id", "false_token_id"):
        value = config.get(key)
        if not (value is None and key == "false_token_id") and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise ValueError(f"{config_file}: {key} must be a token id (an integer >= 0), got {value!r}")
        ids[key] = value
    name = config.get("module_input_name", "causal_logits")
    if name != "causal_logits":
        raise ValueError(f"{config_file}: module_input_name {name!r} is not one numbert reads ('causal_logits')")
    true_id = ids["true_token_id"]
    assert true_id is not None  # checked above
    return LogitScore(true_id, ids["false_token_id"])
