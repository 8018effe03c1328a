"""The one reader of a model directory's JSON files (config.json, modules.json, a module's config, the tokenizer's
files, a shard index), with one error style: every refusal is a ValueError that names the file first
("<file>: not valid JSON (line L): ...", "<file>: expected a JSON object, got a list"); a missing file is a
FileNotFoundError naming it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_json(path: str | os.PathLike) -> Any:
    """The JSON value in the file at `path`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not valid JSON (byte {e.start} is not UTF-8)") from None
    except OSError as e:  # a directory, a file without read permission
        raise ValueError(f"{path}: cannot be read ({e.strerror or e})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON (line {e.lineno}): {e.msg}") from None
    except RecursionError:
        raise ValueError(f"{path}: not valid JSON (nests arrays and objects too deeply to be read)") from None
    except ValueError as e:  # a number past Python's int digits limit
        raise ValueError(f"{path}: not valid JSON ({e})") from None


def read_object(path: str | os.PathLike) -> dict:
    """The JSON object in the file at `path`; anything else (a list, a string, ...) is refused."""
    value = read_json(path)
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object, got a {type(value).__name__}")
    return value


def read_object_if_any(path: str | os.PathLike) -> dict:
    """The JSON object in the file at `path`, {} when there is no such file."""
    return read_object(path) if Path(path).is_file() else {}
