"""The API describes itself: numbert's OpenAPI 3.1 document (GET /openapi.json) and Swagger UI over it (GET /docs).

The document is made from the app's own routes, so it lists every route the server answers (a route missing from
OPERATIONS stops the server at start, naming it): for each, its request and answer schemas (JSON Schema 2020-12,
as OpenAPI 3.1 takes it), its errors (OpenAI's shape, or Ollama's on /api/*) and, when the server has API keys,
the bearer scheme (the open paths say they need none). `/models/{model}/...` are the routes of one served model.

Swagger UI is the npm project's swagger-ui-dist files as the swagger-ui-py package ships them (Apache-2.0): /docs is
an HTML page that loads /docs/swagger-ui-bundle.js and /docs/swagger-ui.css from that package, on this server;
nothing is fetched from elsewhere when the page runs. Without the package, /docs answers 404 saying to install it
(the [serve] extra has it).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from .. import __version__

ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")
DOC_PATHS = ("/openapi.json", "/docs", *(f"/docs/{name}" for name in ASSETS))  # open: they describe, never answer
TEXT = "What is Deep Learning?"

string, boolean, integer, number = {"type": "string"}, {"type": "boolean"}, {"type": "integer"}, {"type": "number"}


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def array(items: dict, **more) -> dict:
    return {"type": "array", "items": items, **more}


def obj(required: list[str], example: dict | None = None, **properties: dict) -> dict:
    schema = {"type": "object", "required": required, "properties": properties}
    return schema | ({"example": example} if example is not None else {})


def nullable(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


VECTOR = array(number)
IDS = array({"type": "integer", "minimum": 0})
SCHEMAS: dict[str, dict] = {
    "Error": obj(
        ["error"],
        error=obj(
            ["message", "type", "param", "code"],
            message=string,
            type=string,
            param=nullable(string),
            code=nullable(string),
        ),
    ),
    "OllamaError": obj(["error"], error=string),
    "Input": {
        "description": "a text, texts, token ids ([CLS] and [SEP] included, as /tokenize gives them), or lists of ids",
        "anyOf": [string, array(string, minItems=1), IDS | {"minItems": 1}, array(IDS, minItems=1)],
    },
    "TruncationDirection": {"enum": ["Right", "Left", "right", "left"]},
    "EmbeddingType": {"enum": ["float", "int8", "uint8", "binary", "ubinary"]},
    "OpenAIEmbeddingRequest": obj(
        ["input"],
        {"input": [TEXT], "model": "model"},
        input=ref("Input"),
        model=string,
        encoding_format={"enum": ["float", "base64"]},
        dimensions={"type": "integer", "minimum": 1},
        user=string,
        embedding_type=ref("EmbeddingType"),
    ),
    "OpenAIEmbeddingResponse": obj(
        ["object", "data", "model", "usage"],
        object={"const": "list"},
        data=array(
            obj(
                ["object", "index", "embedding"],
                object={"const": "embedding"},
                index=integer,
                embedding={"anyOf": [VECTOR, string]},
            )
        ),
        model=string,
        usage=obj(["prompt_tokens", "total_tokens"], prompt_tokens=integer, total_tokens=integer),
    ),
    "EmbedRequest": obj(
        ["inputs"],
        {"inputs": TEXT},
        inputs=ref("Input"),
        normalize=boolean,
        truncate=nullable(boolean),
        truncation_direction=ref("TruncationDirection"),
        prompt_name=nullable(string),
        dimensions=nullable({"type": "integer", "minimum": 1}),
    ),
    "EmbedResponse": array(VECTOR),
    "TokensRequest": obj(
        ["inputs"],
        {"inputs": TEXT},
        inputs=ref("Input"),
        truncate=nullable(boolean),
        truncation_direction=ref("TruncationDirection"),
        prompt_name=nullable(string),
    ),
    "EmbedAllResponse": array(array(VECTOR)),
    "EmbedSparseResponse": array(array(obj(["index", "value"], index=integer, value=number))),
    "EmbedMultiRequest": obj(
        ["inputs"],
        {"inputs": [TEXT], "is_query": True},
        inputs={"anyOf": [string, array(string, minItems=1)]},
        is_query=boolean,
        truncate=nullable(boolean),
        truncation_direction=ref("TruncationDirection"),
    ),
    "SimilarityRequest": obj(
        ["inputs"],
        {"inputs": {"source_sentence": TEXT, "sentences": ["What is Machine Learning?"]}},
        inputs=obj(["source_sentence", "sentences"], source_sentence=string, sentences=array(string, minItems=1)),
        parameters=nullable(
            obj(
                [],
                truncate=nullable(boolean),
                truncation_direction=ref("TruncationDirection"),
                prompt_name=nullable(string),
            )
        ),
    ),
    "SimilarityResponse": array(number),
    "TokenizeRequest": obj(
        ["inputs"], {"inputs": TEXT}, inputs={"anyOf": [string, array(string)]}, add_special_tokens=boolean
    ),
    "TokenizeResponse": array(
        array(
            obj(
                ["id", "text", "special", "start", "stop"],
                id=integer,
                text=string,
                special=boolean,
                start=nullable(integer),
                stop=nullable(integer),
            )
        )
    ),
    "DecodeRequest": obj(
        ["ids"], {"ids": [101, 7592, 102]}, ids={"anyOf": [IDS, array(IDS)]}, skip_special_tokens=boolean
    ),
    "DecodeResponse": array(string),
    "RerankRequest": obj(
        ["query", "texts"],
        {"query": TEXT, "texts": ["Deep Learning is ..."]},
        query=string,
        texts=array(string, minItems=1),
        raw_scores=boolean,
        return_text=boolean,
        truncate=nullable(boolean),
        truncation_direction=ref("TruncationDirection"),
    ),
    "RerankResponse": array(obj(["index", "score"], index=integer, score=number, text=string)),
    "CohereRerankRequest": obj(
        ["query", "documents"],
        {"query": TEXT, "documents": ["Deep Learning is ..."]},
        model=string,
        query=string,
        documents=array({"anyOf": [string, obj(["text"], text=string)]}, minItems=1),
        top_n={"type": "integer", "minimum": 1},
        return_documents=boolean,
    ),
    "CohereRerankResponse": obj(
        ["results", "model", "usage"],
        results=array(
            obj(
                ["index", "relevance_score"],
                index=integer,
                relevance_score=number,
                document=obj(["text"], text=string),
            )
        ),
        model=string,
        usage=obj(["total_tokens"], total_tokens=integer),
    ),
    "PredictRequest": obj(
        ["inputs"],
        {"inputs": TEXT},
        inputs={"anyOf": [string, array(string, minItems=1, maxItems=2), array({"anyOf": [string, array(string)]})]},
        raw_scores=boolean,
        truncate=nullable(boolean),
        truncation_direction=ref("TruncationDirection"),
    ),
    "Prediction": obj(["score", "label"], score=number, label=string),
    "PredictResponse": {"anyOf": [array(ref("Prediction")), array(array(ref("Prediction")))]},
    "Info": obj(
        ["model_id", "model_dtype", "model_type", "max_input_length", "max_batch_tokens", "version"],
        model_id=string,
        model_sha=nullable(string),
        model_dtype=string,
        model_type={"type": "object"},
        max_concurrent_requests=integer,
        max_input_length=integer,
        max_batch_tokens=integer,
        max_batch_requests=nullable(integer),
        max_client_batch_size=integer,
        auto_truncate=boolean,
        tokenization_workers=integer,
        version=string,
        sha=nullable(string),
        docker_label=nullable(string),
        served_model_name=nullable(string),
    ),
    "Models": obj(
        ["object", "data"],
        object={"const": "list"},
        data=array(obj(["id", "object"], id=string, object=string, created=integer, owned_by=string)),
    ),
    "Health": obj(["status"], status={"enum": ["ready", "loading", "error"]}, error=nullable(string)),
    "OllamaEmbedRequest": obj(
        ["model", "input"],
        {"model": "model", "input": [TEXT]},
        model=string,
        input={"anyOf": [string, array(string, minItems=1)]},
        truncate=boolean,
        dimensions={"type": "integer", "minimum": 1},
        keep_alive={"anyOf": [string, number]},
        options={"type": "object"},
    ),
    "OllamaEmbedResponse": obj(
        ["model", "embeddings", "total_duration", "load_duration", "prompt_eval_count"],
        model=string,
        embeddings=array(VECTOR),
        total_duration=integer,
        load_duration=integer,
        prompt_eval_count=integer,
    ),
    "OllamaEmbeddingsRequest": obj(
        ["model", "prompt"],
        {"model": "model", "prompt": TEXT},
        model=string,
        prompt=string,
        keep_alive={"anyOf": [string, number]},
        options={"type": "object"},
    ),
    "OllamaEmbeddingsResponse": obj(["embedding"], embedding=VECTOR),
    "OllamaModel": obj(
        ["name", "model", "modified_at", "size", "digest", "details"],
        name=string,
        model=string,
        modified_at=string,
        size=integer,
        digest=string,
        details={"type": "object"},
    ),
    "OllamaTags": obj(["models"], models=array(ref("OllamaModel"))),
    "OllamaShowRequest": obj(["model"], {"model": "model"}, model=string),
    "OllamaShow": obj(
        ["details", "model_info", "capabilities"],
        details={"type": "object"},
        model_info={"type": "object"},
        capabilities=array(string),
        modified_at=string,
    ),
    "OllamaVersion": obj(["version"], version=string),
}


@dataclass(frozen=True)
class Operation:
    """One route's method, what it does, its request and answer schemas (or media type) and its error statuses."""

    method: str
    summary: str
    request: str | None
    answer: str | None  # a schema name; None for text (/metrics, /docs)
    errors: tuple[int, ...] = (400, 413, 422, 429, 503, 504)
    media: str = "application/json"


INPUTS = (400, 404, 408, 413, 422, 429, 499, 503, 504)  # a route that reads a body and queues its inputs
OPERATIONS = {
    "/v1/embeddings": Operation("post", "OpenAI's embeddings", "OpenAIEmbeddingRequest", "OpenAIEmbeddingResponse"),
    "/embed": Operation("post", "TEI: sentence vectors", "EmbedRequest", "EmbedResponse"),
    "/embed_all": Operation("post", "TEI: every token's vector of the last layer", "TokensRequest", "EmbedAllResponse"),
    "/similarity": Operation(
        "post", "TEI: cosine of a sentence with sentences", "SimilarityRequest", "SimilarityResponse"
    ),
    "/embed_sparse": Operation("post", "TEI: sparse vectors (SPLADE, BGE-M3)", "TokensRequest", "EmbedSparseResponse"),
    "/embed_multi": Operation(
        "post",
        "Multi-vector (ColBERT, BGE-M3): a query's or a document's token vectors",
        "EmbedMultiRequest",
        "EmbedAllResponse",
    ),
    "/tokenize": Operation("post", "TEI: tokens with offsets", "TokenizeRequest", "TokenizeResponse"),
    "/decode": Operation("post", "TEI: token ids as text", "DecodeRequest", "DecodeResponse"),
    "/rerank": Operation("post", "TEI: documents best first for a query", "RerankRequest", "RerankResponse"),
    "/v1/rerank": Operation("post", "Cohere/Jina: rerank", "CohereRerankRequest", "CohereRerankResponse"),
    "/predict": Operation("post", "TEI: a classifier's labels", "PredictRequest", "PredictResponse"),
    "/info": Operation("get", "TEI: the served model", None, "Info", (404, 503)),
    "/api/embed": Operation("post", "Ollama: embeddings", "OllamaEmbedRequest", "OllamaEmbedResponse"),
    "/api/embeddings": Operation(
        "post", "Ollama (older): one embedding", "OllamaEmbeddingsRequest", "OllamaEmbeddingsResponse"
    ),
    "/api/show": Operation("post", "Ollama: a model's details", "OllamaShowRequest", "OllamaShow", (400, 404, 503)),
    "/api/tags": Operation("get", "Ollama: the served models", None, "OllamaTags", ()),
    "/api/version": Operation("get", "Ollama: the server's version", None, "OllamaVersion", ()),
    "/v1/models": Operation("get", "OpenAI: the served models", None, "Models", ()),
    "/health": Operation("get", "ready once every model is loaded (503 until then)", None, "Health", (503,)),
    "/metrics": Operation("get", "Prometheus counters", None, None, (), "text/plain"),
    "/openapi.json": Operation("get", "this document", None, None, (), "application/json"),
    "/docs": Operation("get", "Swagger UI over this document", None, None, (404,), "text/html"),
    **{
        f"/docs/{name}": Operation("get", f"Swagger UI's {name}", None, None, (404,), "application/octet-stream")
        for name in ASSETS
    },
}
ERROR_TEXT = {
    400: "a body that is not JSON, or a request the model cannot answer",
    401: "no served API key (Authorization: Bearer KEY)",
    404: "a model not served",
    408: "the body did not arrive within --body-timeout",
    413: "too many inputs, tokens or bytes",
    422: "a field of the wrong type or value, named in 'param'",
    429: "--max-concurrent-requests in flight; retry after Retry-After",
    499: "the client closed the connection before its answer",
    503: "the model is loading, or failed to load",
    504: "not answered within --request-timeout",
}


def document(paths: list[tuple[str, set[str]]], keys: bool, open_paths: tuple[str, ...]) -> dict:
    """The OpenAPI 3.1 document of the routes (Starlette paths and methods); bearer auth when `keys`."""
    described: dict[str, dict] = {}
    for path, methods in paths:
        base = path.split("{model:path}", 1)[-1] if path.startswith("/models/") else path
        if base not in OPERATIONS:
            raise ValueError(f"the route {path} has no OpenAPI description: add it to numbert.serve.openapi.OPERATIONS")
        op = OPERATIONS[base]
        if op.method.upper() not in methods:
            raise ValueError(f"the route {path} answers {sorted(methods)}, its description says {op.method}")
        openapi_path = path.replace("{model:path}", "{model}")
        described[openapi_path] = {op.method: operation(op, base, path != base, keys and base not in open_paths)}
    doc: dict = {
        "openapi": "3.1.0",
        "info": {
            "title": "numbert serve",
            "version": __version__,
            "description": "BERT in NumPy behind OpenAI's, text-embeddings-inference's, Cohere's and Ollama's APIs. "
            "/models/{model}/... routes answer with the served model named.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "paths": described,
        "components": {"schemas": SCHEMAS},
    }
    if keys:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
    return doc


def operation(op: Operation, base: str, per_model: bool, protected: bool) -> dict:
    """One OpenAPI operation object."""
    ollama = base.startswith("/api/")
    error = ref("OllamaError" if ollama else "Error")
    ok: dict = {"description": "the answer"}
    if op.answer is not None:
        ok["content"] = {op.media: {"schema": ref(op.answer)}}
    elif op.media != "application/json":
        ok["content"] = {op.media: {"schema": string}}
    statuses = (*op.errors, *((401,) if protected else ()))
    responses = {"200": ok} | {
        str(status): {
            "description": ERROR_TEXT.get(status, "error"),
            "content": {"application/json": {"schema": error}},
        }
        for status in sorted(set(statuses))
    }
    described: dict = {
        "summary": op.summary,
        "operationId": ("model" if per_model else "") + base.replace("/", "_").replace(".", "_"),
        "tags": ["per model" if per_model else base.split("/")[1] if base.startswith(("/api", "/v1")) else "numbert"],
        "responses": responses,
    }
    if op.request is not None:
        described["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref(op.request)}}}
    if per_model:
        described["parameters"] = [{"name": "model", "in": "path", "required": True, "schema": string}]
    if not protected:
        described["security"] = []
    return described


def assets() -> Path | None:
    """The directory of Swagger UI's files (the swagger-ui-py package's static/), or None without the package."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        return None
    static = Path(list(spec.submodule_search_locations)[0]) / "static"
    return static if (static / "swagger-ui-bundle.js").is_file() else None


PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>numbert serve: API</title>
  <link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
  <link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({
      url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true, tryItOutEnabled: true
    });
  </script>
</body>
</html>
"""
