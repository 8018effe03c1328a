"""text-embeddings-inference's /embed, /embed_all, /embed_sparse, /similarity, /rerank, /predict, /tokenize and
/decode, and numbert's /embed_multi: their requests' shapes and their answers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from .common import (
    QUERY,
    ApiError,
    EmbeddingRequest,
    Field,
    ScoringRequest,
    answer_json,
    arrays_json,
    boolean,
    check_ids,
    checked,
    direction,
    inputs,
    json_object,
    json_ready,
    json_type,
    nested,
    not_applied,
    positive,
    strict_json,
    string,
    string_list,
    texts,
    too_many,
)

TEI_INPUTS = Field("inputs", read=lambda obj, name, most: inputs(obj, name, most))
TEI = (TEI_INPUTS, boolean("normalize", True), boolean("truncate"), string("prompt_name"), direction(), string("task"),
       positive("dimensions"))  # fmt: skip
TEI_TOKENS = (TEI_INPUTS, boolean("truncate"), string("prompt_name"), direction())


def tei_request(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """POST /embed (text-embeddings-inference): {"inputs", "normalize": true, "truncate", "truncation_direction",
    "prompt_name", "dimensions" (TEI 1.9's Matryoshka cut), "task" (jina's)}."""
    v = checked(json_object(body), TEI, max_inputs)
    (texts, ids), side = v["inputs"], v["truncation_direction"]
    return EmbeddingRequest(
        texts, ids, normalize=v["normalize"], truncate=v["truncate"], prompt_name=v["prompt_name"],
        truncation_side=side, task=v["task"], dimensions=v["dimensions"],
    )  # fmt: skip


def tei_tokens_request(body: bytes, max_inputs: int) -> EmbeddingRequest:
    """POST /embed_sparse and /embed_all (text-embeddings-inference): {"inputs", "truncate",
    "truncation_direction", "prompt_name"}."""
    v = checked(json_object(body), TEI_TOKENS, max_inputs)
    (texts, ids), side = v["inputs"], v["truncation_direction"]
    return EmbeddingRequest(texts, ids, truncate=v["truncate"], prompt_name=v["prompt_name"], truncation_side=side)


@dataclass
class SimilarityRequest:
    """What /similarity asks for: the cosine of the source sentence's vector with each sentence's."""

    texts: list[str]  # the source sentence, then the sentences
    names: list[str]  # the field each text came from ("inputs.sentences[3]"), for errors
    truncate: bool | None = None  # None: the server's --auto-truncate
    prompt_name: str | None = None  # the model's prompt to prepend (None: the server's prompt)
    truncation_side: str | None = None  # "right" or "left" (None: the tokenizer's)


SIMILARITY_PARAMETERS = (boolean("parameters.truncate"), string("parameters.prompt_name"),
                         direction("parameters.truncation_direction"))  # fmt: skip


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
    v = checked(parameters, SIMILARITY_PARAMETERS)
    return SimilarityRequest(
        [source, *sentences],
        ["inputs.source_sentence"] + [f"inputs.sentences[{i}]" for i in range(len(sentences))],
        truncate=v["truncate"],
        prompt_name=v["prompt_name"],
        truncation_side=v["truncation_direction"],
    )


TEI_RERANK = (
    QUERY,
    Field("texts", read=string_list),
    boolean("raw_scores", False),
    boolean("truncate"),
    boolean("return_text", False),
    direction(),
)


def tei_rerank_request(body: bytes, max_inputs: int) -> ScoringRequest:
    """POST /rerank (text-embeddings-inference): {"query", "texts", "raw_scores", "return_text", "truncate",
    "truncation_direction"}."""
    v = checked(json_object(body), TEI_RERANK, max_inputs)
    query, texts = v["query"], v["texts"]
    return ScoringRequest(
        "rerank",
        "texts",
        [query] * len(texts),
        list(texts),
        [f"texts[{i}]" for i in range(len(texts))],
        raw_scores=v["raw_scores"],
        truncate=v["truncate"],
        return_text=v["return_text"],
        truncation_side=v["truncation_direction"],
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


PREDICT = (boolean("raw_scores", False), boolean("truncate"), direction())  # beside "inputs", read by predict_request


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
    v = checked(obj, PREDICT)
    return ScoringRequest(
        "predict",
        "inputs",
        [a for a, _ in inputs],
        [b for _, b in inputs],
        names,
        raw_scores=v["raw_scores"],
        truncate=v["truncate"],
        single=single,
        truncation_side=v["truncation_direction"],
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
    return rows, checked(obj, (boolean("skip_special_tokens", True),))["skip_special_tokens"]


TOKENIZE = (texts("inputs", "a string or a list of strings to tokenize"), boolean("add_special_tokens", True))


def tokenize_request(body: bytes, max_inputs: int) -> tuple[list[str], bool]:
    """POST /tokenize (text-embeddings-inference): {"inputs": str | [str], "add_special_tokens": true}; a prompt_name
    (TEI 1.9 tokenizes the prompt too) is refused rather than ignored."""
    obj = json_object(body)
    if obj.get("prompt_name") is not None:
        not_applied(obj, "prompt_name", "/tokenize tokenizes the text as sent: put the prompt's text before it")
    v = checked(obj, TOKENIZE, max_inputs)
    return v["inputs"], v["add_special_tokens"]


def tei_response(vectors: np.ndarray) -> bytes:
    """[[float, ...], ...]: one array per input."""
    return arrays_json(vectors)


def similarity_response(similarities: np.ndarray) -> bytes:
    """/similarity: [float, ...], the source sentence's cosine with each sentence."""
    return arrays_json(similarities)


def embed_all_response(vectors: list[np.ndarray]) -> bytes:
    """[[[float, ...], ...], ...]: per input, one array per token ([CLS] and [SEP] included)."""
    return arrays_json(vectors)


def sparse_response(vectors: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """/embed_sparse: per input [{"index": vocabulary id, "value": weight}], ids ascending, non-zero weights only;
    weights with 9 significant digits (`nine_digits`). vectors: (ids, weights) per input."""
    answers = [
        [{"index": i, "value": w} for i, w in zip(ids.tolist(), json_ready(weights).tolist())]
        for ids, weights in vectors
    ]
    return answer_json(answers)


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
    return json.dumps(out, ensure_ascii=False).encode()  # small answers: the standard library's bytes, as before


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
    return strict_json(answer)  # small answers: the standard library's bytes, as before


def predict_response(scores: np.ndarray, labels: list[str], single: bool) -> bytes:
    """/predict: per input [{"score", "label"}] best first; one such list for a single input."""
    answers = [
        [{"score": score, "label": label} for score, label in sorted(zip(row.tolist(), labels), key=lambda p: -p[0])]
        for row in scores
    ]
    return strict_json(answers[0] if single else answers)


@dataclass
class MultiVectorRequest:
    """What /embed_multi asks for: each text's token vectors, as a query's or a document's."""

    texts: list[str]
    is_query: bool = False  # queries: marked and expanded with [MASK]; documents: marked, the skiplist dropped
    truncate: bool | None = None  # None: the server's --auto-truncate (a ColBERT model cuts to its lengths anyway)
    truncation_side: str | None = None


MULTI_VECTOR = (
    texts("inputs", "a string or a list of strings"),
    boolean("is_query", False),
    boolean("truncate"),
    direction(),
)


def multi_vector_request(body: bytes, max_inputs: int) -> MultiVectorRequest:
    """POST /embed_multi: {"inputs": str | [str], "is_query": false, "truncate", "truncation_direction"}."""
    obj = json_object(body)
    not_applied(obj, "task", "/embed_multi gives a multi-vector model's token vectors, which have no task adapters")
    v = checked(obj, MULTI_VECTOR, max_inputs)
    return MultiVectorRequest(
        v["inputs"], is_query=v["is_query"], truncate=v["truncate"], truncation_side=v["truncation_direction"]
    )
