"""OpenAI's /v1/embeddings: its request's shape (with jina's "task" and Infinity's "embedding_type") and its
answer."""

from __future__ import annotations

import json

import numpy as np

from .common import (
    EMBEDDING_TYPES,
    EmbeddingRequest,
    Field,
    answer_json,
    base64_strings,
    checked,
    inputs,
    json_object,
    json_ready,
    positive,
    string,
)

EMBEDDING_TYPE = Field(  # Infinity's (OpenAI's schema has no such field): sentence-transformers' precision names
    "embedding_type", (str,), "one of '" + "', '".join(EMBEDDING_TYPES) + "'", choices=EMBEDDING_TYPES
)
OPENAI = (
    Field("input", read=lambda obj, name, most: inputs(obj, name, most)),
    string("model"),
    string("user"),
    Field("encoding_format", (str,), "'float' or 'base64'", "float", choices={"float": "float", "base64": "base64"}),
    positive("dimensions", below=400),
    string("task"),  # jina-embeddings-v3's task, as jina's API names it
    EMBEDDING_TYPE,
)


def openai_request(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """POST /v1/embeddings: {"input", "model", "encoding_format", "dimensions", "user", "task" (jina's),
    "embedding_type" (Infinity's)}."""
    v = checked(json_object(body), OPENAI, max_inputs)
    texts, ids = v["input"]
    return EmbeddingRequest(
        texts,
        ids,
        v["encoding_format"],
        v["dimensions"],
        model=v["model"],
        precision=v["embedding_type"],
        task=v["task"],
    )


def openai_response(vectors: np.ndarray, encoding_format: str, model: str, tokens: int) -> bytes:
    """{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": ...}], "model", "usage"}"""
    base64 = encoding_format == "base64"
    embeddings = base64_strings(vectors) if base64 else json_ready(vectors)
    data = answer_json([{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(embeddings)])
    usage = f'{{"prompt_tokens":{tokens},"total_tokens":{tokens}}}'
    return b'{"object":"list","data":' + data + f',"model":{json.dumps(model)},"usage":{usage}}}'.encode()
