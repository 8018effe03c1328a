"""What every API's wire format shares: the errors (OpenAI's shape), strict JSON, the request body as a JSON
object, the declarative shapes of requests (`Field`, `checked`: name, types, default, accepted values, bounds) and
the readers of the structures several APIs take (inputs, lists of strings), and the float renderers.

Parsing checks every field a request carries before any work is done, and a bad one is an
`ApiError` naming it: 400 for a body that is not JSON, 422 for a wrong type or value, 413 for too
many inputs. Rendering writes the answers: floats with 9 significant digits (enough to give back
every float32 exactly), or base64 of little-endian float32, as the official openai client decodes it.
Quantized vectors (Infinity's `embedding_type`) are arrays of integers, or base64 of their bytes. Every answer is
strict JSON: a number that is not finite (NaN, infinity: a broken model's) is never written (`NotFinite`, a 500).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import orjson

ERROR_TYPES = {  # else invalid_request_error
    429: "requests",
    500: "server_error",
    503: "server_error",
    504: "server_error",
}
EMBEDDING_TYPES = {"float": "float32", "int8": "int8", "uint8": "uint8", "binary": "binary", "ubinary": "ubinary"}


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


class ModelNotFound(ApiError):
    """A 404: a request names a model this server does not serve, answered in each API's own words (OpenAI's
    model_not_found; Ollama's `model "X" not found, try pulling it first`)."""

    def __init__(self, asked: str, served: list[str]):
        listed = ", ".join(repr(n) for n in served)
        message = f"'model' names the model {clipped(asked)!r}, which this server does not serve; it serves {listed}"
        super().__init__(404, message, param="model", code="model_not_found")
        self.ollama_message = f'model "{clipped(asked)}" not found, try pulling it first'


def clipped(name: str, limit: int = 80) -> str:
    """A client's name as an answer quotes it: at most `limit` characters (a name of 100,000 is not echoed back),
    a lone surrogate (which UTF-8 cannot carry) written as its escape."""
    name = name if len(name) <= limit else name[: limit - 3] + "..."
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


class NotFinite(ApiError):
    """A 500: an answer would hold a number that is not finite (NaN or infinity), which JSON cannot; the model's
    fault (its weights or configuration), named when known (`model`), not the client's."""

    def __init__(self, model: str | None = None):
        who = "the model" if model is None else f"the model {model!r}"
        super().__init__(
            500,
            f"{who} produced numbers that are not finite (NaN or infinity) for these inputs: its weights or "
            f"configuration are broken, and no answer is written with them",
            code="non_finite_output",
        )


def finite(values: np.ndarray) -> np.ndarray:
    """`values` if every number in them is finite, else NotFinite: what the renderers write goes through here."""
    if values.dtype.kind in "fc" and not np.isfinite(values).all():
        raise NotFinite()
    return values


def strict_json(value: Any, ensure_ascii: bool = False) -> bytes:
    """`value` as strict JSON (NotFinite for a float that is not finite: never NaN or Infinity, which JSON lacks)."""
    try:
        return json.dumps(value, ensure_ascii=ensure_ascii, allow_nan=False).encode()
    except ValueError as e:
        if "JSON compliant" in str(e):
            raise NotFinite() from None
        raise


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
    model: str | None = None  # OpenAI's: the served model asked for
    precision: str | None = (
        None  # Infinity's embedding_type, as numbert.pipeline.quantization names it (None: the server's)
    )
    truncation_side: str | None = None  # TEI's truncation_direction: "right" or "left" (None: the tokenizer's)
    task: str | None = None  # jina's embeddings API: the task adapters to run (None: the server's)


NUMPY = orjson.OPT_SERIALIZE_NUMPY
LONG_INTEGER = re.compile(rb"\d{19}")  # a number orjson may read as a float (beyond 64 bits), or within a string


def parsed(body: bytes) -> Any:
    """The body parsed by orjson (C, several times the standard library's speed), or by the standard library when
    orjson refuses it (not JSON, NaN or Infinity, a lone surrogate, a number beyond a double) or the body holds an
    integer orjson would read as a float: so every body reads, and fails, exactly as the standard library has it."""
    if not LONG_INTEGER.search(body):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return json.loads(body)


def json_object(body: bytes) -> dict:
    """The request body as a JSON object, or a 400 (not JSON) / 422 (JSON, but not an object)."""
    try:
        value = parsed(body)
    except RecursionError:
        raise ApiError(400, "the request body is not valid JSON: it nests too deeply", code="invalid_json") from None
    except ValueError as e:  # json.JSONDecodeError, UnicodeDecodeError
        raise ApiError(400, f"the request body is not valid JSON: {e}", code="invalid_json") from None
    if not isinstance(value, dict):
        raise ApiError(422, f"the request body must be a JSON object, not {json_type(value)}")
    if SURROGATE_ESCAPE.search(body):  # only a \uD800-\uDFFF escape can put a surrogate in a parsed string
        refuse_lone_surrogates(value)
    return value


SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
SURROGATE = re.compile("[\ud800-\udfff]")


def refuse_lone_surrogates(value: dict) -> None:
    """A 400 naming the first string (or key) holding a lone surrogate: JSON allows the escape (`"\\ud800"`),
    Unicode does not, and UTF-8 cannot encode it (a tokenizer or an answer would fail on it later). A pair of
    escapes that makes one character (an emoji) was joined by the parser and is no surrogate any more."""
    stack: list[tuple[str, Any]] = [("", value)]  # (path, value), walked without recursion
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            found = SURROGATE.search(item)
            if found:
                raise ApiError(
                    400,
                    f"{path} holds a lone surrogate (U+{ord(found.group()):04X} at character {found.start()}), "
                    f"which is not a Unicode character: send UTF-8 text, or a surrogate pair for a character "
                    f"beyond U+FFFF",
                    param=path,
                    code="invalid_text",
                )
        elif isinstance(item, dict):
            for key, inner in reversed(item.items()):
                name = f"{path}.{key}" if path else key
                if SURROGATE.search(key):
                    raise ApiError(400, f"a key of {path or 'the body'} holds a lone surrogate", param=path or None)
                stack.append((name, inner))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", inner) for i, inner in reversed(list(enumerate(item))))


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


@dataclass(frozen=True)
class Field:
    """A field of a request's shape, checked by `checked`: absent or null gives `default`; else a value of one of
    `kinds` (bool is never a number), one of `choices` (the accepted spellings, by the value they stand for;
    `fold`: whatever their case) and at least `least` (`below`: the status of a number under it), or an ApiError
    saying it `must be {what}`. `read` checks a field of a structure of its own instead: read(obj, name, max_inputs)."""

    name: str  # its key in the body; "parameters.truncate" for a nested object's field (`nested`)
    kinds: tuple[type, ...] = ()
    what: str = ""
    default: Any = None
    choices: dict[str, Any] | None = None
    fold: bool = False
    least: int | None = None
    below: int = 422
    read: Callable[[dict, str, int], Any] | None = None

    def value(self, obj: dict[str, Any], max_inputs: int) -> Any:
        """The field's value in the request object `obj`, checked."""
        if self.read is not None:
            return self.read(obj, self.name, max_inputs)
        name = self.name
        value: Any = obj.get(name)  # a parsed JSON value
        if value is None:
            return self.default
        if not isinstance(value, self.kinds) or (isinstance(value, bool) and bool not in self.kinds):
            what = self.what or " or ".join(k.__name__ for k in self.kinds)
            raise ApiError(422, f"'{name}' must be {what}, not {json_type(value)}", param=name)
        if self.choices is not None:
            key = str(value).lower() if self.fold else value
            if key not in self.choices:
                raise ApiError(422, f"'{name}' must be {self.what}, not {value!r}", param=name)
            return self.choices[key]
        if self.least is not None and cast(float, value) < self.least:
            raise ApiError(self.below, f"'{name}' must be {self.what}, not {value}", param=name)
        return value


def checked(obj: dict, shape: tuple[Field, ...], max_inputs: int = 0) -> dict[str, Any]:
    """A request's fields by the last part of their names, each checked in the shape's order (so the first field
    wrong is the one named)."""
    return {f.name.rsplit(".", 1)[-1]: f.value(obj, max_inputs) for f in shape}


def string(name: str, default: str | None = None) -> Field:
    return Field(name, (str,), "a string", default)


def boolean(name: str, default: bool | None = None) -> Field:
    return Field(name, (bool,), "a boolean", default)


def positive(name: str, below: int = 422) -> Field:
    return Field(name, (int,), "a positive integer", least=1, below=below)


def texts(name: str, what: str, ollama: bool = False) -> Field:
    """A field of inputs as `inputs` reads them, refused as token ids: "'{name}' must be {what}, not token ids" (as
    Ollama says it: without the ", not token ids")."""

    def read(obj: dict, name: str, max_inputs: int) -> list[str]:
        values, ids = inputs(obj, name, max_inputs)
        if ids:
            raise ApiError(422, f"'{name}' must be {what}" + ("" if ollama else ", not token ids"), param=name)
        return values

    return Field(name, read=read)


def direction(name: str = "truncation_direction") -> Field:
    """text-embeddings-inference's truncation_direction, "Right" (cut a long input at its end) or "Left" (at its
    start, keeping its end), as numbert's truncation_side ("right", "left")."""
    return Field(name, (str,), "'Right' or 'Left'", choices={"right": "right", "left": "left"}, fold=True)


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
    too_many(value, name, max_inputs)
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


def nested(obj: dict, name: str) -> dict:
    """The object obj[name] (absent: empty) with its fields named by their paths ("parameters.truncate"), so
    that `field` and `string_list` name them so in errors."""
    value = obj.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ApiError(422, f"'{name}' must be an object, not {json_type(value)}", param=name)
    return {f"{name}.{key}": item for key, item in value.items()}


@dataclass
class ScoringRequest:
    """What /rerank, /v1/rerank and /predict ask for, in one form: inputs of one text or a pair, scored by the
    model's classifier."""

    kind: str  # "rerank" (text-embeddings-inference), "cohere" (/v1/rerank) or "predict"
    source: str  # the field holding the inputs: "texts", "documents" or "inputs"
    firsts: list[str]  # each input's first text (rerank: the query, each time)
    seconds: list[str | None]  # each input's second text (rerank: a document), None for a single text
    names: list[str]  # the field each input came from ("texts[3]"), for errors
    raw_scores: bool = False  # the logits themselves, without the model's activation
    truncate: bool | None = None  # None: the server's --auto-truncate
    return_text: bool = False  # rerank: echo each document
    top_n: int | None = None  # /v1/rerank: the best top_n only
    single: bool = False  # /predict: one input, answered with one list of labels
    model: str | None = None  # /v1/rerank: the served model asked for
    truncation_side: str | None = None  # TEI's truncation_direction: "right" or "left" (None: the tokenizer's)


def text_field(obj: dict, name: str) -> str:
    """obj[name], a required non-empty string, else a 422 naming it."""
    value = obj.get(name)
    if not isinstance(value, str) or not value.strip():
        what = "an empty string" if isinstance(value, str) else "missing" if value is None else json_type(value)
        raise ApiError(422, f"'{name}' must be a non-empty string, not {what}", param=name)
    return value


def string_list(obj: dict, name: str, max_inputs: int, item=None) -> list[str]:
    """obj[name], a required non-empty list of strings (each taken by `item(value, where)` if given, else
    checked a string), at most max_inputs (413); else a 422 naming the field or the item."""
    value = obj.get(name)
    if not isinstance(value, list) or not value:
        what = "an empty array" if value == [] else "missing" if value is None else json_type(value)
        raise ApiError(422, f"'{name}' must be a non-empty list of strings, not {what}", param=name)
    too_many(value, name, max_inputs)
    texts = []
    for i, text in enumerate(value):
        if item is not None:
            text = item(text, f"{name}[{i}]")
        elif not isinstance(text, str):
            raise ApiError(422, f"'{name}[{i}]' must be a string, not {json_type(text)}", param=f"{name}[{i}]")
        texts.append(text)
    return texts


def too_many(value: list, name: str, max_inputs: int) -> None:
    if len(value) > max_inputs:
        raise ApiError(
            413,
            f"'{name}' holds {len(value)} inputs; this server takes at most {max_inputs} per "
            f"request (--max-client-batch-size)",
            param=name,
            code="too_many_inputs",
        )


QUERY = Field("query", read=lambda obj, name, most: text_field(obj, name))


def not_applied(obj: dict, name: str, why: str) -> None:
    """A 422 naming field `name` if the request carries it: a route that cannot apply a field refuses it rather
    than answer as if it were not there."""
    if name in obj:
        raise ApiError(422, f"'{name}' is not applied here: {why}", param=name, code="field_not_applied")


# --- answers ---------------------------------------------------------------------------------------


POWERS = np.array([float(10**k) for k in range(23)])  # the powers of ten a double holds exactly


def nine_digits(values: np.ndarray) -> np.ndarray:
    """Float32 values as the doubles their 9-significant-digit decimals (`"%.9g"`, which gives back every float32)
    stand for, without formatting a number in Python: x scaled by an exact power of ten to 9 integer digits,
    rounded, divided back (IEEE division is correctly rounded, so the result is the double nearest the decimal,
    the one a JSON parser reads). Values too large, too small or too near a rounding tie for the scaled product
    to be rounded as the exact one are formatted as "%.9g" and read back (a few in 100,000)."""
    x = values.astype(np.float64)
    size = np.abs(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = 8 - np.floor(np.log10(size))  # the power of ten that brings x to 9 integer digits
        k = np.where(np.isfinite(k), k, -1).astype(np.int64)
        k += (size * POWERS[np.clip(k, 0, 22)] < 1e8).astype(np.int64)  # log10 a little off at a power of ten
        k -= (size * POWERS[np.clip(k, 0, 22)] >= 1e9).astype(np.int64)
        exact = (k >= 0) & (k <= 22)
        scale = POWERS[np.clip(k, 0, 22)]
        scaled = size * scale
        exact &= np.abs(scaled - np.floor(scaled) - 0.5) > 1e-6  # not within the product's error of a tie
        out = np.copysign(np.rint(scaled) / scale, x)
    out[size == 0] = x[size == 0]
    slow = ~exact & (size != 0)
    if slow.any():
        out[slow] = [float(f"{v:.9g}") for v in x[slow].tolist()]
    return out


def arrays_json(vectors: np.ndarray | list[np.ndarray]) -> bytes:
    """An array (or a list of arrays) as nested JSON arrays of numbers, written by orjson straight from the array:
    a float as the double its 9 significant digits stand for (`nine_digits`: the numbers "%.9g" wrote, read back
    to the same doubles), integers (quantized vectors) as integers. Never NaN or infinity (`finite`)."""
    if isinstance(vectors, np.ndarray):
        return orjson.dumps(json_ready(vectors), option=NUMPY)
    return orjson.dumps([json_ready(v) for v in vectors], option=NUMPY)


def json_ready(values: np.ndarray) -> np.ndarray:
    """An array as orjson writes it: checked finite, floats as `nine_digits`, C-contiguous."""
    values = finite(values)
    return nine_digits(values) if values.dtype.kind == "f" else np.ascontiguousarray(values)


def answer_json(value: Any) -> bytes:
    """An answer of Python values and NumPy arrays or numbers (their floats checked finite beforehand) as JSON."""
    return orjson.dumps(value, option=NUMPY)


def base64_strings(vectors: np.ndarray) -> list[str]:
    """Each row of (n, dim) as a JSON string: base64 of its little-endian float32 bytes (of its int8 or uint8
    bytes, one a value, for quantized vectors)."""
    rows = np.ascontiguousarray(finite(vectors), dtype=vectors.dtype if vectors.dtype.kind in "iu" else "<f4")
    return [base64.b64encode(row.tobytes()).decode("ascii") for row in rows]
