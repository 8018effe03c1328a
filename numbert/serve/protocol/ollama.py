"""Ollama's embedding API (/api/embed, /api/embeddings, /api/tags, /api/show, /api/version): its requests'
shapes, its answers and its error shape ({"error": message})."""

from __future__ import annotations

import json

import numpy as np

from .common import (
    ApiError,
    EmbeddingRequest,
    Field,
    arrays_json,
    boolean,
    checked,
    json_object,
    not_applied,
    positive,
    string,
    texts,
)


def ollama_error(error: ApiError) -> bytes:
    """An error as Ollama answers it: {"error": message}."""
    return json.dumps({"error": getattr(error, "ollama_message", error.message)}, ensure_ascii=False).encode()


OLLAMA_OPTIONS = (  # accepted and of no effect: the model stays loaded, and its recipe is the server's
    Field("keep_alive", (str, int, float), "a duration such as '5m', or a number of seconds"),
    Field("options", (dict,), "an object"),
)
OLLAMA_EMBED = (
    texts("input", "a string or a list of strings", ollama=True),
    positive("dimensions", below=400),
    *OLLAMA_OPTIONS,
    boolean("truncate", True),
)
OLLAMA_EMBEDDINGS = (string("prompt", ""), *OLLAMA_OPTIONS)


def ollama_embed_request(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """POST /api/embed: {"model", "input": str | [str], "truncate": true, "dimensions", "keep_alive", "options"}.
    As in Ollama, an input too long for the model is cut unless "truncate" is false."""
    obj = json_object(body)
    not_applied(obj, "task", "Ollama's /api/embed has no task; send it to /v1/embeddings or /embed")
    v = checked(obj, OLLAMA_EMBED, max_inputs)
    model = ollama_model(obj, required=False)
    return EmbeddingRequest(v["input"], False, dimensions=v["dimensions"], truncate=v["truncate"], model=model)


def ollama_embeddings_parse(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """ollama_embeddings_request, called as the other parsers are."""
    return ollama_embeddings_request(body)


def ollama_embeddings_request(body: bytes) -> EmbeddingRequest:
    """POST /api/embeddings (Ollama's older route): {"model", "prompt", "keep_alive", "options"}; an empty prompt
    is answered with an empty embedding, as Ollama does."""
    obj = json_object(body)
    prompt = checked(obj, OLLAMA_EMBEDDINGS)["prompt"]
    return EmbeddingRequest([prompt] if prompt else [], False, truncate=True, model=ollama_model(obj, required=False))


def ollama_model(obj: dict, required: bool = True, name: str = "model") -> str | None:
    """The model a request names ("model", else Ollama's older "name"), without Ollama's default tag ":latest"."""
    value = string(name).value(obj, 0) or string("name").value(obj, 0)
    if value is None and required:
        raise ApiError(400, f"'{name}' is required: the name of a served model (GET /api/tags lists them)", param=name)
    return None if value is None else value.removesuffix(":latest")


def ollama_embed_response(vectors: np.ndarray, model: str, tokens: int, total_ns: int, load_ns: int) -> bytes:
    """/api/embed: {"model", "embeddings": [[float]], "total_duration", "load_duration", "prompt_eval_count"};
    durations in nanoseconds."""
    embeddings = arrays_json(vectors) if len(vectors) else b"[]"
    durations = f',"total_duration":{total_ns},"load_duration":{load_ns},"prompt_eval_count":{tokens}}}'
    return f'{{"model":{json.dumps(model)},"embeddings":'.encode() + embeddings + durations.encode()


def ollama_embeddings_response(vectors: np.ndarray) -> bytes:
    """/api/embeddings: {"embedding": [float]} ([] for an empty prompt)."""
    return b'{"embedding":' + (arrays_json(vectors[0]) if len(vectors) else b"[]") + b"}"
