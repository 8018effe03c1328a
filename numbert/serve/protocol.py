"""The wire formats: OpenAI's /v1/embeddings and error shape, text-embeddings-inference's /embed, /embed_all,
/embed_sparse, /similarity, /tokenize, /decode, /rerank and /predict, and the Cohere/Jina-style /v1/rerank.

Parsing checks every field a request carries before any work is done, and a bad one is an
`ApiError` naming it: 400 for a body that is not JSON, 422 for a wrong type or value, 413 for too
many inputs. Rendering writes the answers: floats with 9 significant digits (enough to give back
every float32 exactly), or base64 of little-endian float32, as the official openai client decodes it.
Quantized vectors (Infinity's `embedding_type`) are arrays of integers, or base64 of their bytes. Every answer is
strict JSON: a number that is not finite (NaN, infinity: a broken model's) is never written (`NotFinite`, a 500).
"""

from __future__ import annotations

import base64
import functools
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

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


def openai_request(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """POST /v1/embeddings: {"input", "model", "encoding_format", "dimensions", "user", "task" (jina's)}."""
    obj = json_object(body)
    texts, ids = inputs(obj, "input", max_inputs)
    model = field(obj, "model", (str,), what="a string")
    field(obj, "user", (str,), what="a string")
    encoding_format = field(obj, "encoding_format", (str,), "float", "'float' or 'base64'")
    if encoding_format not in ("float", "base64"):
        raise ApiError(
            422, f"'encoding_format' must be 'float' or 'base64', not {encoding_format!r}", param="encoding_format"
        )
    dimensions = field(obj, "dimensions", (int,), what="a positive integer")
    if dimensions is not None and dimensions < 1:
        raise ApiError(400, f"'dimensions' must be a positive integer, not {dimensions}", param="dimensions")
    task = field(obj, "task", (str,), None, "a string")  # jina-embeddings-v3's task, as jina's API names it
    return EmbeddingRequest(
        texts, ids, encoding_format, dimensions, model=model, precision=embedding_type(obj), task=task
    )


def embedding_type(obj: dict) -> str | None:
    """Infinity's "embedding_type" (OpenAI's schema has no such field): float, or the vectors quantized as
    sentence-transformers' quantize_embeddings does (numbert.pipeline.quantization), by its precision name; None if
    absent."""
    names = "', '".join(EMBEDDING_TYPES)
    value = field(obj, "embedding_type", (str,), None, f"one of '{names}'")
    if value is None:
        return None
    if value not in EMBEDDING_TYPES:
        raise ApiError(422, f"'embedding_type' must be one of '{names}', not {value!r}", param="embedding_type")
    return EMBEDDING_TYPES[value]


def truncation_direction(obj: dict, name: str = "truncation_direction") -> str | None:
    """text-embeddings-inference's truncation_direction, "Right" (cut a long input at its end) or "Left" (at its
    start, keeping its end), as numbert's truncation_side ("right", "left"); None if absent."""
    value = field(obj, name, (str,), None, "'Right' or 'Left'")
    if value is None:
        return None
    if value.lower() not in ("right", "left"):
        raise ApiError(422, f"'{name}' must be 'Right' or 'Left', not {value!r}", param=name)
    return value.lower()


def tei_request(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """POST /embed (text-embeddings-inference): {"inputs", "normalize": true, "truncate", "truncation_direction",
    "prompt_name", "task" (jina's)}."""
    obj = json_object(body)
    texts, ids = inputs(obj, "inputs", max_inputs)
    return EmbeddingRequest(
        texts,
        ids,
        normalize=field(obj, "normalize", (bool,), True, "a boolean"),
        truncate=field(obj, "truncate", (bool,), None, "a boolean"),
        prompt_name=field(obj, "prompt_name", (str,), None, "a string"),
        truncation_side=truncation_direction(obj),
        task=field(obj, "task", (str,), None, "a string"),
    )


def tei_tokens_request(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """POST /embed_sparse and /embed_all (text-embeddings-inference): {"inputs", "truncate",
    "truncation_direction", "prompt_name"}."""
    obj = json_object(body)
    texts, ids = inputs(obj, "inputs", max_inputs)
    return EmbeddingRequest(
        texts,
        ids,
        truncate=field(obj, "truncate", (bool,), None, "a boolean"),
        prompt_name=field(obj, "prompt_name", (str,), None, "a string"),
        truncation_side=truncation_direction(obj),
    )


@dataclass
class SimilarityRequest:
    """What /similarity asks for: the cosine of the source sentence's vector with each sentence's."""

    texts: list[str]  # the source sentence, then the sentences
    names: list[str]  # the field each text came from ("inputs.sentences[3]"), for errors
    truncate: bool | None = None  # None: the server's --auto-truncate
    prompt_name: str | None = None  # the model's prompt to prepend (None: the server's prompt)
    truncation_side: str | None = None  # "right" or "left" (None: the tokenizer's)


def nested(obj: dict, name: str) -> dict:
    """The object obj[name] (absent: empty) with its fields named by their paths ("parameters.truncate"), so
    that `field` and `string_list` name them so in errors."""
    value = obj.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ApiError(422, f"'{name}' must be an object, not {json_type(value)}", param=name)
    return {f"{name}.{key}": item for key, item in value.items()}


def similarity_request(body: bytes, max_inputs: int) -> SimilarityRequest:
    """POST /similarity (text-embeddings-inference): {"inputs": {"source_sentence", "sentences"},
    "parameters": {"prompt_name", "truncate", "truncation_direction"}}. The source sentence counts as an
    input towards max_inputs (413 beyond), as there."""
    obj = json_object(body)
    if obj.get("inputs") is None:
        raise ApiError(422, '\'inputs\' is required: {"source_sentence": str, "sentences": [str]}', param="inputs")
    inputs, parameters = nested(obj, "inputs"), nested(obj, "parameters")
    source = inputs.get("inputs.source_sentence")
    if not isinstance(source, str):
        what = "missing" if source is None else json_type(source)
        raise ApiError(422, f"'inputs.source_sentence' must be a string, not {what}", param="inputs.source_sentence")
    listed = inputs.get("inputs.sentences")
    if isinstance(listed, list) and len(listed) + 1 > max_inputs:
        raise ApiError(
            413,
            f"'inputs.sentences' holds {len(listed)} sentences, {len(listed) + 1} inputs with the source sentence; "
            f"this server takes at most {max_inputs} per request (--max-client-batch-size)",
            param="inputs.sentences",
            code="too_many_inputs",
        )
    sentences = string_list(inputs, "inputs.sentences", max_inputs)
    return SimilarityRequest(
        [source, *sentences],
        ["inputs.source_sentence"] + [f"inputs.sentences[{i}]" for i in range(len(sentences))],
        truncate=field(parameters, "parameters.truncate", (bool,), None, "a boolean"),
        prompt_name=field(parameters, "parameters.prompt_name", (str,), None, "a string"),
        truncation_side=truncation_direction(parameters, "parameters.truncation_direction"),
    )


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


def tei_rerank_request(body: bytes, max_inputs: int) -> ScoringRequest:
    """POST /rerank (text-embeddings-inference): {"query", "texts", "raw_scores", "return_text", "truncate",
    "truncation_direction"}."""
    obj = json_object(body)
    query, texts = text_field(obj, "query"), string_list(obj, "texts", max_inputs)
    return ScoringRequest(
        "rerank",
        "texts",
        [query] * len(texts),
        list(texts),
        [f"texts[{i}]" for i in range(len(texts))],
        raw_scores=field(obj, "raw_scores", (bool,), False, "a boolean"),
        truncate=field(obj, "truncate", (bool,), None, "a boolean"),
        return_text=field(obj, "return_text", (bool,), False, "a boolean"),
        truncation_side=truncation_direction(obj),
    )


def document_text(value, where: str) -> str:
    """A /v1/rerank document: a string, or an object with a string "text"."""
    if isinstance(value, dict):
        value = value.get("text")
        where += ".text"
    if not isinstance(value, str):
        raise ApiError(422, f"'{where}' must be a string (or an object with a string 'text')", param=where)
    return value


def cohere_rerank_request(body: bytes, max_inputs: int) -> ScoringRequest:
    """POST /v1/rerank (Cohere, Jina): {"model", "query", "documents": [str | {"text"}], "top_n", "return_documents"}.
    Long documents are cut to fit, as those services do."""
    obj = json_object(body)
    model = field(obj, "model", (str,), what="a string")
    query, documents = text_field(obj, "query"), string_list(obj, "documents", max_inputs, document_text)
    top_n = field(obj, "top_n", (int,), None, "a positive integer")
    if top_n is not None and top_n < 1:
        raise ApiError(422, f"'top_n' must be a positive integer, not {top_n}", param="top_n")
    return ScoringRequest(
        "cohere",
        "documents",
        [query] * len(documents),
        list(documents),
        [f"documents[{i}]" for i in range(len(documents))],
        truncate=True,
        return_text=field(obj, "return_documents", (bool,), False, "a boolean"),
        top_n=top_n,
        model=model,
    )


def predict_input(value, where: str) -> tuple[str, str | None]:
    """A /predict input: a string, a [string] (in a batch, as TEI takes it), or a [string, string] pair."""
    if isinstance(value, str):
        return value, None
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        return value[0], None
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return value[0], value[1]
    what = "a string, a [string] or a pair [string, string]"
    raise ApiError(422, f"'{where}' must be {what}, not {json_type(value)}", param=where)


def predict_request(body: bytes, max_inputs: int) -> ScoringRequest:
    """POST /predict (text-embeddings-inference): {"inputs": a str, a [str, str] pair, or a list of those,
    "raw_scores", "truncate", "truncation_direction"}. As there, a list of two strings is one pair."""
    obj = json_object(body)
    value = obj.get("inputs")
    single = isinstance(value, str) or (
        isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)
    )
    if single:
        inputs, names = [predict_input(value, "inputs")], ["inputs"]
    elif isinstance(value, list) and value:
        too_many(value, "inputs", max_inputs)
        names = [f"inputs[{i}]" for i in range(len(value))]
        inputs = [predict_input(v, where) for v, where in zip(value, names)]
    else:
        what = "an empty array" if value == [] else "missing" if value is None else json_type(value)
        raise ApiError(
            422, f"'inputs' must be a string, a pair [string, string] or a list of those, not {what}", param="inputs"
        )
    return ScoringRequest(
        "predict",
        "inputs",
        [a for a, _ in inputs],
        [b for _, b in inputs],
        names,
        raw_scores=field(obj, "raw_scores", (bool,), False, "a boolean"),
        truncate=field(obj, "truncate", (bool,), None, "a boolean"),
        single=single,
        truncation_side=truncation_direction(obj),
    )


def decode_request(body: bytes, max_inputs: int) -> tuple[list[list[int]], bool]:
    """POST /decode (text-embeddings-inference): {"ids": [int] | [[int]], "skip_special_tokens": true}."""
    obj = json_object(body)
    value = obj.get("ids")
    what = "a list of token ids or a list of lists of token ids"
    if not isinstance(value, list) or not value:
        got = "an empty array" if value == [] else json_type(value)
        raise ApiError(422, f"'ids' must be {what}, not {got}", param="ids")
    rows = [value] if not isinstance(value[0], list) else value
    too_many(rows, "ids", max_inputs)
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            raise ApiError(422, f"'ids[{i}]' must be a list of token ids, not {json_type(row)}", param=f"ids[{i}]")
        check_ids(row, "ids" if rows is not value else f"ids[{i}]")
    return rows, field(obj, "skip_special_tokens", (bool,), True, "a boolean")


def tokenize_request(body: bytes, max_inputs: int) -> tuple[list[str], bool]:
    """POST /tokenize (text-embeddings-inference): {"inputs": str | [str], "add_special_tokens": true}."""
    obj = json_object(body)
    texts, ids = inputs(obj, "inputs", max_inputs)
    if ids:
        raise ApiError(422, "'inputs' must be a string or a list of strings to tokenize, not token ids", param="inputs")
    return texts, field(obj, "add_special_tokens", (bool,), True, "a boolean")


# --- answers ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def row_format(dim: int, number: str = "%.9g") -> str:
    """A %-format writing `dim` numbers as a JSON array: floats with 9 significant digits each (float32
    round-trips), or integers ("%d")."""
    return "[" + ",".join([number] * dim) + "]"


def float_arrays(vectors: np.ndarray) -> list[str]:
    """Each row of (n, dim) as a JSON array of numbers (integers for quantized vectors)."""
    fmt = row_format(vectors.shape[1], "%d" if vectors.dtype.kind in "iu" else "%.9g")
    return [fmt % tuple(row.tolist()) for row in finite(vectors)]  # a row at a time: no list of all the floats


def base64_strings(vectors: np.ndarray) -> list[str]:
    """Each row of (n, dim) as a JSON string: base64 of its little-endian float32 bytes (of its int8 or uint8
    bytes, one a value, for quantized vectors)."""
    rows = np.ascontiguousarray(finite(vectors), dtype=vectors.dtype if vectors.dtype.kind in "iu" else "<f4")
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


def similarity_response(similarities: np.ndarray) -> bytes:
    """/similarity: [float, ...], the source sentence's cosine with each sentence."""
    return float_arrays(similarities[None])[0].encode()


def embed_all_response(vectors: list[np.ndarray]) -> bytes:
    """[[[float, ...], ...], ...]: per input, one array per token ([CLS] and [SEP] included)."""
    return ("[" + ",".join("[" + ",".join(float_arrays(v)) + "]" for v in vectors) + "]").encode()


def sparse_response(vectors: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """/embed_sparse: per input [{"index": vocabulary id, "value": weight}], ids ascending, non-zero weights only;
    weights with 9 significant digits. vectors: (ids, weights) per input."""
    answers = [
        "[" + ",".join(f'{{"index":{i},"value":{w:.9g}}}' for i, w in zip(ids.tolist(), finite(weights).tolist())) + "]"
        for ids, weights in vectors
    ]
    return ("[" + ",".join(answers) + "]").encode()


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


def rerank_response(request: ScoringRequest, scores: np.ndarray, order: list[int], model: str, tokens: int) -> bytes:
    """/rerank: [{"index", "score", "text"?}] best first; /v1/rerank: {"results": [{"index", "relevance_score",
    "document"?: {"text"}}], "model", "usage": {"total_tokens"}} best first."""
    tei = request.kind == "rerank"
    results: list[dict[str, Any]] = []
    for i in order:
        result: dict[str, Any] = {"index": i, "score" if tei else "relevance_score": float(scores[i])}
        if request.return_text:
            result["text" if tei else "document"] = request.seconds[i] if tei else {"text": request.seconds[i]}
        results.append(result)
    answer = results if tei else {"results": results, "model": model, "usage": {"total_tokens": tokens}}
    return strict_json(answer)


def predict_response(scores: np.ndarray, labels: list[str], single: bool) -> bytes:
    """/predict: per input [{"score", "label"}] best first; one such list for a single input."""
    answers = [
        [{"score": score, "label": label} for score, label in sorted(zip(row.tolist(), labels), key=lambda p: -p[0])]
        for row in scores
    ]
    return strict_json(answers[0] if single else answers)


# --- multi-vector output (numbert's /embed_multi) --------------------------------------------------------------


@dataclass
class MultiVectorRequest:
    """What /embed_multi asks for: each text's token vectors, as a query's or a document's."""

    texts: list[str]
    is_query: bool = False  # queries: marked and expanded with [MASK]; documents: marked, the skiplist dropped
    truncate: bool | None = None  # None: the server's --auto-truncate (a ColBERT model cuts to its lengths anyway)
    truncation_side: str | None = None


def multi_vector_request(body: bytes, max_inputs: int) -> MultiVectorRequest:
    """POST /embed_multi: {"inputs": str | [str], "is_query": false, "truncate", "truncation_direction"}."""
    obj = json_object(body)
    not_applied(obj, "task", "/embed_multi gives a multi-vector model's token vectors, which have no task adapters")
    texts, ids = inputs(obj, "inputs", max_inputs)
    if ids:
        raise ApiError(422, "'inputs' must be a string or a list of strings, not token ids", param="inputs")
    return MultiVectorRequest(
        texts,
        is_query=field(obj, "is_query", (bool,), False, "a boolean"),
        truncate=field(obj, "truncate", (bool,), None, "a boolean"),
        truncation_side=truncation_direction(obj),
    )


def not_applied(obj: dict, name: str, why: str) -> None:
    """A 422 naming field `name` if the request carries it: a route that cannot apply a field refuses it rather
    than answer as if it were not there."""
    if name in obj:
        raise ApiError(422, f"'{name}' is not applied here: {why}", param=name, code="field_not_applied")


# --- Ollama's embedding API (/api/embed, /api/embeddings, /api/tags, /api/show, /api/version) ---------------------


def ollama_error(error: ApiError) -> bytes:
    """An error as Ollama answers it: {"error": message}."""
    return json.dumps({"error": getattr(error, "ollama_message", error.message)}, ensure_ascii=False).encode()


def ollama_options(obj: dict) -> None:
    """keep_alive (a duration string or seconds) and options (an object) are accepted and have no effect: the model
    stays loaded, and its recipe is the server's."""
    field(obj, "keep_alive", (str, int, float), what="a duration such as '5m', or a number of seconds")
    field(obj, "options", (dict,), what="an object")


def ollama_embed_request(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """POST /api/embed: {"model", "input": str | [str], "truncate": true, "dimensions", "keep_alive", "options"}.
    As in Ollama, an input too long for the model is cut unless "truncate" is false."""
    obj = json_object(body)
    not_applied(obj, "task", "Ollama's /api/embed has no task; send it to /v1/embeddings or /embed")
    texts, ids = inputs(obj, "input", max_inputs)
    if ids:
        raise ApiError(422, "'input' must be a string or a list of strings", param="input")
    dimensions = field(obj, "dimensions", (int,), what="a positive integer")
    if dimensions is not None and dimensions < 1:
        raise ApiError(400, f"'dimensions' must be a positive integer, not {dimensions}", param="dimensions")
    ollama_options(obj)
    return EmbeddingRequest(
        texts,
        False,
        dimensions=dimensions,
        truncate=field(obj, "truncate", (bool,), True, "a boolean"),
        model=ollama_model(obj, required=False),
    )


def ollama_embeddings_parse(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """ollama_embeddings_request, called as the other parsers are."""
    return ollama_embeddings_request(body)


def ollama_embeddings_request(body: bytes) -> EmbeddingRequest:
    """POST /api/embeddings (Ollama's older route): {"model", "prompt", "keep_alive", "options"}; an empty prompt
    is answered with an empty embedding, as Ollama does."""
    obj = json_object(body)
    prompt = field(obj, "prompt", (str,), "", "a string")
    ollama_options(obj)
    return EmbeddingRequest([prompt] if prompt else [], False, truncate=True, model=ollama_model(obj, required=False))


def ollama_model(obj: dict, required: bool = True, name: str = "model") -> str | None:
    """The model a request names ("model", else Ollama's older "name"), without Ollama's default tag ":latest"."""
    value = field(obj, name, (str,), what="a string") or field(obj, "name", (str,), what="a string")
    if value is None and required:
        raise ApiError(400, f"'{name}' is required: the name of a served model (GET /api/tags lists them)", param=name)
    return None if value is None else value.removesuffix(":latest")


def ollama_embed_response(vectors: np.ndarray, model: str, tokens: int, total_ns: int, load_ns: int) -> bytes:
    """/api/embed: {"model", "embeddings": [[float]], "total_duration", "load_duration", "prompt_eval_count"};
    durations in nanoseconds."""
    embeddings = "[" + ",".join(float_arrays(vectors)) + "]" if len(vectors) else "[]"
    return (
        f'{{"model":{json.dumps(model)},"embeddings":{embeddings},"total_duration":{total_ns},'
        f'"load_duration":{load_ns},"prompt_eval_count":{tokens}}}'
    ).encode()


def ollama_embeddings_response(vectors: np.ndarray) -> bytes:
    """/api/embeddings: {"embedding": [float]} ([] for an empty prompt)."""
    return ('{"embedding":' + (float_arrays(vectors)[0] if len(vectors) else "[]") + "}").encode()
