"""The wire formats: OpenAI's /v1/embeddings and error shape, text-embeddings-inference's /embed and /tokenize.

Parsing checks every field a request carries before any work is done, and a bad one is an
`ApiError` naming it: 400 for a body that is not JSON, 422 for a wrong type or value, 413 for too
many inputs. Rendering writes the answers: floats with 9 significant digits (enough to give back
every float32 exactly), or base64 of little-endian float32, as the official openai client decodes it.
"""

from __future__ import annotations

import base64
import functools
import json
from dataclasses import dataclass

import numpy as np

ERROR_TYPES = {429: "requests", 503: "server_error", 500: "server_error"}  # else invalid_request_error


class ApiError(Exception):
    """An answer other than 200, in OpenAI's error shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    def body(self) -> bytes:
        error = {
            "message": self.message,
            "type": ERROR_TYPES.get(self.status, "invalid_request_error"),
            "param": self.param,
            "code": self.code,
        }
        return json.dumps({"error": error}, ensure_ascii=False).encode()


@dataclass
class EmbeddingRequest:
    """What /v1/embeddings and /embed ask for, in one form."""

    inputs: list  # texts (str), or token ids (list[int], [CLS] and [SEP] included) per input
    ids: bool  # the inputs are token ids
    encoding_format: str = "float"  # or "base64"
    dimensions: int | None = None  # keep the first `dimensions` values, then renormalize
    normalize: bool | None = None  # None: the server's recipe (OpenAI); TEI's /embed says true or false
    truncate: bool | None = None  # None: the server's --auto-truncate
    prompt_name: str | None = None  # TEI's /embed: the model's prompt to prepend (None: the server's prompt)


def json_object(body: bytes) -> dict:
    """The request body as a JSON object, or a 400 (not JSON) / 422 (JSON, but not an object)."""
    try:
        value = json.loads(body)
    except RecursionError:
        raise ApiError(400, "the request body is not valid JSON: it nests too deeply", code="invalid_json") from None
    except ValueError as e:  # json.JSONDecodeError, UnicodeDecodeError
        raise ApiError(400, f"the request body is not valid JSON: {e}", code="invalid_json") from None
    if not isinstance(value, dict):
        raise ApiError(422, f"the request body must be a JSON object, not {json_type(value)}")
    return value


def json_type(value) -> str:
    """The JSON name of a parsed value's type, for error messages."""
    for kind, name in (
        (bool, "a boolean"),
        (int, "a number"),
        (float, "a number"),
        (str, "a string"),
        (list, "an array"),
        (dict, "an object"),
    ):
        if isinstance(value, kind):
            return name
    return "null"


def field(obj: dict, name: str, kinds: tuple[type, ...], default=None, what: str = ""):
    """obj[name] if present and of one of `kinds` (bool is never a number), else `default`; else a 422."""
    value = obj.get(name)
    if value is None:
        return default
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ApiError(
            422,
            f"'{name}' must be {what or ' or '.join(k.__name__ for k in kinds)}, not {json_type(value)}",
            param=name,
        )
    return value


def inputs(obj: dict, name: str, max_inputs: int) -> tuple[list, bool]:
    """The inputs in obj[name]: a string, a list of strings, a list of token ids or a list of lists of ids.

    Returns (inputs, ids): one list item per input, and whether they are token ids.
    """
    value = obj.get(name)
    what = "a string, a list of strings, a list of token ids or a list of lists of token ids"
    if value is None:
        raise ApiError(422, f"'{name}' is required: {what}", param=name)
    if isinstance(value, str):
        return [value], False
    if not isinstance(value, list):
        raise ApiError(422, f"'{name}' must be {what}, not {json_type(value)}", param=name)
    if not value:
        raise ApiError(422, f"'{name}' must not be empty", param=name)
    if is_id(value[0]):  # one input given as token ids
        check_ids(value, name)
        return [value], True
    if len(value) > max_inputs:
        raise ApiError(
            413,
            f"'{name}' holds {len(value)} inputs; this server takes at most {max_inputs} per "
            f"request (--max-client-batch-size)",
            param=name,
            code="too_many_inputs",
        )
    if isinstance(value[0], list):
        for i, item in enumerate(value):
            if not isinstance(item, list) or not item:
                raise ApiError(
                    422,
                    f"'{name}[{i}]' must be a non-empty list of token ids, not "
                    f"{'an empty array' if item == [] else json_type(item)}",
                    param=f"{name}[{i}]",
                )
            check_ids(item, f"{name}[{i}]")
        return value, True
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ApiError(422, f"'{name}[{i}]' must be a string, not {json_type(item)}", param=f"{name}[{i}]")
    return value, False


def is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_ids(ids: list, name: str) -> None:
    for j, token in enumerate(ids):
        if not is_id(token):
            raise ApiError(
                422, f"'{name}[{j}]' must be a token id (an integer), not {json_type(token)}", param=f"{name}[{j}]"
            )


def openai_request(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """POST /v1/embeddings: {"input", "model", "encoding_format", "dimensions", "user"}."""
    obj = json_object(body)
    texts, ids = inputs(obj, "input", max_inputs)
    field(obj, "model", (str,), what="a string")  # any name is answered by the one model served
    field(obj, "user", (str,), what="a string")
    encoding_format = field(obj, "encoding_format", (str,), "float", "'float' or 'base64'")
    if encoding_format not in ("float", "base64"):
        raise ApiError(
            422, f"'encoding_format' must be 'float' or 'base64', not {encoding_format!r}", param="encoding_format"
        )
    dimensions = field(obj, "dimensions", (int,), what="a positive integer")
    if dimensions is not None and dimensions < 1:
        raise ApiError(400, f"'dimensions' must be a positive integer, not {dimensions}", param="dimensions")
    return EmbeddingRequest(texts, ids, encoding_format, dimensions)


def tei_request(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """POST /embed (text-embeddings-inference): {"inputs", "normalize": true, "truncate", "prompt_name"}."""
    obj = json_object(body)
    texts, ids = inputs(obj, "inputs", max_inputs)
    return EmbeddingRequest(
        texts,
        ids,
        normalize=field(obj, "normalize", (bool,), True, "a boolean"),
        truncate=field(obj, "truncate", (bool,), None, "a boolean"),
        prompt_name=field(obj, "prompt_name", (str,), None, "a string"),
    )


def tokenize_request(body: bytes, max_inputs: int) -> tuple[list[str], bool]:
    """POST /tokenize (text-embeddings-inference): {"inputs": str | [str], "add_special_tokens": true}."""
    obj = json_object(body)
    texts, ids = inputs(obj, "inputs", max_inputs)
    if ids:
        raise ApiError(422, "'inputs' must be a string or a list of strings to tokenize, not token ids", param="inputs")
    return texts, field(obj, "add_special_tokens", (bool,), True, "a boolean")


# --- answers ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def row_format(dim: int) -> str:
    """A %-format writing `dim` floats as a JSON array, 9 significant digits each (float32 round-trips)."""
    return "[" + ",".join(["%.9g"] * dim) + "]"


def float_arrays(vectors: np.ndarray) -> list[str]:
    """Each row of (n, dim) as a JSON array of numbers."""
    fmt = row_format(vectors.shape[1])
    return [fmt % tuple(row) for row in vectors.tolist()]


def base64_strings(vectors: np.ndarray) -> list[str]:
    """Each row of (n, dim) as a JSON string: base64 of its little-endian float32 bytes."""
    rows = np.ascontiguousarray(vectors, dtype="<f4")
    return ['"' + base64.b64encode(row.tobytes()).decode("ascii") + '"' for row in rows]


def openai_response(vectors: np.ndarray, encoding_format: str, model: str, tokens: int) -> bytes:
    """{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": ...}], "model", "usage"}"""
    embeddings = base64_strings(vectors) if encoding_format == "base64" else float_arrays(vectors)
    data = ",".join(f'{{"object":"embedding","index":{i},"embedding":{e}}}' for i, e in enumerate(embeddings))
    usage = f'{{"prompt_tokens":{tokens},"total_tokens":{tokens}}}'
    return f'{{"object":"list","data":[{data}],"model":{json.dumps(model)},"usage":{usage}}}'.encode()


def tei_response(vectors: np.ndarray) -> bytes:
    """[[float, ...], ...]: one array per input."""
    return ("[" + ",".join(float_arrays(vectors)) + "]").encode()


def tokenize_response(encodings: list, texts: list[str]) -> bytes:
    """[[{"id", "text", "special", "start", "stop"}, ...], ...]: start/stop are character offsets
    into the input (null for [CLS] and [SEP]); text is the input's own characters for a real token."""
    out = []
    for encoding, text in zip(encodings, texts):
        tokens = []
        for token_id, token, special, (start, stop) in zip(
            encoding.ids, encoding.tokens, encoding.special_tokens_mask, encoding.offsets
        ):
            tokens.append(
                {
                    "id": token_id,
                    "text": token if special else text[start:stop],
                    "special": bool(special),
                    "start": None if special else start,
                    "stop": None if special else stop,
                }
            )
        out.append(tokens)
    return json.dumps(out, ensure_ascii=False).encode()
