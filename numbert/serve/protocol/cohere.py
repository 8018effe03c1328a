"""The Cohere/Jina-style /v1/rerank: its request's shape."""

from __future__ import annotations

from .common import QUERY, ApiError, Field, ScoringRequest, boolean, checked, json_object, positive, string, string_list


def document_text(value, where: str) -> str:
    """A /v1/rerank document: a string, or an object with a string "text"."""
    if isinstance(value, dict):
        value = value.get("text")
        where += ".text"
    if not isinstance(value, str):
        raise ApiError(422, f"'{where}' must be a string (or an object with a string 'text')", param=where)
    return value


COHERE_RERANK = (
    string("model"),
    QUERY,
    Field("documents", read=lambda obj, name, most: string_list(obj, name, most, document_text)),
    positive("top_n"),
    boolean("return_documents", False),
)


def cohere_rerank_request(body: bytes, max_inputs: int) -> ScoringRequest:
    """POST /v1/rerank (Cohere, Jina): {"model", "query", "documents": [str | {"text"}], "top_n", "return_documents"}.
    Long documents are cut to fit, as those services do."""
    v = checked(json_object(body), COHERE_RERANK, max_inputs)
    query, documents = v["query"], v["documents"]
    return ScoringRequest(
        "cohere",
        "documents",
        [query] * len(documents),
        list(documents),
        [f"documents[{i}]" for i in range(len(documents))],
        truncate=True,
        return_text=v["return_documents"],
        top_n=v["top_n"],
        model=v["model"],
    )
