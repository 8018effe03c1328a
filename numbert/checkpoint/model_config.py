"""A checkpoint's config.json (or Google's bert_config.json), read once: the encoder's config and the heads' fields
come from the same parsed object."""

from __future__ import annotations

import os

from ..model.config import BertConfig
from ..model.heads import HeadConfig
from .json_file import read_object


def read_model_config(path: str | os.PathLike) -> tuple[BertConfig, HeadConfig]:
    """The encoder's config and the heads' fields in the config file at `path`; every error names the file."""
    try:
        fields = read_object(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"no config.json at {path}") from None
    return BertConfig.from_dict(fields, source=str(path)), HeadConfig.from_dict(fields, source=str(path))


def read_config(path: str | os.PathLike) -> BertConfig:
    """The encoder's config in the config file at `path`."""
    return read_model_config(path)[0]
