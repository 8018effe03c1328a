"""`numbert search`: the lines of a corpus nearest to a query, by the vectors `numbert encode` wrote for them.

    numbert encode --file corpus.txt -o vectors.npy
    numbert search "Who painted the Mona Lisa?" --index vectors.npy --texts corpus.txt --top-k 3

The index is read and scanned a chunk at a time (numbert.semantic_search over an engines.npy.NpyIndex), so it
need not fit in memory; its header and size are checked first, and a file truncated or written to during the
search is an error (replace an index by renaming a new file over it, never rewrite it in place). Rows whose
score is not finite (NaN) are no hits. The query is embedded by the recipe the same options give `numbert
encode` (--pooling, --dimensions, --prompt...), and only the hits' lines of --texts are kept.

Late interaction (--multi-index): the dense search's --candidates best lines are rescored by MaxSim of the query's
token vectors with theirs (a two-stage search: dense first stage, MaxSim second; numbert.cli.multi reads the index),
and the --top-k best by MaxSim printed. The multi-vector model is --multi-model (a ColBERT), else --model (BGE-M3
gives both: its dense vector for the first stage, its token vectors for the second).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from ..engines.npy import NpyIndex
from ..pipeline import maxsim, semantic_search, similarity_of
from .common import (
    Failure,
    add_dimensions,
    add_model,
    add_prompt_options,
    add_sentence_options,
    add_vector_options,
    fixed,
    load_model,
    positive_int,
    utf8_text,
)
from .encode import sentence_recipe
from .files import decoded_lines
from .multi import MultiIndex

CHUNK_BYTES = 64 << 20  # the index is read (and scored) this many bytes of rows at a time


def search(args: argparse.Namespace) -> None:
    """Print the --top-k lines of --texts whose vectors in --index score best against QUERY's (cosine)."""
    with open_index(args.index) as index:
        search_index(args, index)


def search_index(args: argparse.Namespace, index: NpyIndex) -> None:
    model = load_model(args.model)
    recipe = sentence_recipe(model, args)
    if recipe.dim != index.shape[1]:
        raise Failure(
            f"{args.index} holds vectors of width {index.shape[1]} but these options give {recipe.dim}: "
            f"search with the options the index was encoded with (--dimensions, --pooling, --model)"
        )
    query = model.embed([args.query], recipe=recipe, progress=False)
    chunk = max(1, CHUNK_BYTES // (4 * index.shape[1]))
    hits: list[dict]
    try:
        if args.multi_index is None:
            hits = [dict(hit) for hit in semantic_search(query, index, top_k=args.top_k, corpus_chunk_size=chunk)[0]]
        else:  # late interaction: MaxSim over the dense search's best candidates
            top = max(args.candidates, args.top_k)
            candidates = semantic_search(query, index, top_k=top, corpus_chunk_size=chunk)[0]
        index.check_unchanged()
    except ValueError as e:  # the file truncated or rewritten while it was read
        raise Failure(str(e)) from None
    if args.multi_index is not None:
        hits = rescored(args, [hit["corpus_id"] for hit in candidates], len(index), model)
    texts = lines_at(args.texts, {hit["corpus_id"] for hit in hits}, len(index))
    if args.json:
        print(json.dumps([{**hit, "text": texts[hit["corpus_id"]]} for hit in hits], ensure_ascii=False))
        return
    for hit in hits:
        print(f"{fixed(hit['score'], 4)}\t{hit['corpus_id']}\t{texts[hit['corpus_id']]}")


def rescored(args: argparse.Namespace, candidates: list[int], rows: int, model) -> list[dict]:
    """The --top-k of `candidates` by the late-interaction score (MaxSim; meanmaxsim for a model that names it) of
    QUERY's token vectors with theirs in --multi-index, by --multi-model (default: --model), best first; a candidate
    whose token vectors are not all finite is dropped."""
    multi = MultiIndex(args.multi_index)
    if len(multi) != rows:
        raise Failure(f"{args.multi_index} holds {len(multi)} texts but {args.index} {rows}: encode both from one file")
    late = model if args.multi_model is None else load_model(args.multi_model)
    try:
        query = late.embed_multi(args.query, is_query=True)
        normalized = similarity_of(late) == "meanmaxsim"
    except ValueError as e:
        raise Failure(f"--multi-index needs a multi-vector model (--multi-model): {e}") from None
    vectors = {i: np.asarray(multi[i]) for i in candidates}
    candidates = [i for i in candidates if np.isfinite(vectors[i]).all()]  # as the dense search, NaN is never a hit
    scores = [float(maxsim(query, vectors[i], length_normalize=normalized)) for i in candidates]
    order = sorted(range(len(candidates)), key=lambda k: (-scores[k], candidates[k]))[: args.top_k]
    return [{"corpus_id": candidates[k], "score": scores[k]} for k in order]


def open_index(path: str) -> NpyIndex:
    """The .npy at `path`, read a chunk at a time: (rows, dim) float32 (either byte order), else a Failure
    saying what it holds."""
    try:
        return NpyIndex(path)
    except OSError as e:
        raise Failure(f"cannot read the index {path}: {e.strerror}") from None
    except ValueError as e:
        raise Failure(str(e)) from None


def lines_at(path: str, wanted: set[int], rows: int) -> dict[int, str]:
    """The lines numbered `wanted` (from 0) of the text file at `path`, which must have one line per index row."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise Failure(f"cannot read {path}: {e.strerror}") from None
    found, count = {}, 0
    for count, line in enumerate(decoded_lines(f, path), 1):
        if count - 1 in wanted:
            found[count - 1] = line
    if count != rows:
        raise Failure(
            f"{path} has {count} lines but the index {rows} vectors: give the file the index was encoded from"
        )
    return found


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert search`."""
    p = commands.add_parser(
        "search",
        help="the lines of a corpus nearest to a query, by their vectors",
        description="Embed QUERY and print the --top-k lines of --texts whose vectors in --index (a float32 "
        ".npy that `numbert encode --file TEXTS -o INDEX` wrote, read a chunk at a time) are nearest by cosine: "
        "score, line number (from 0) and line, best first.",
    )
    p.add_argument("query", type=utf8_text, metavar="QUERY")
    p.add_argument("--index", required=True, metavar="INDEX", help="the corpus's vectors, a (lines, dim) .npy")
    p.add_argument("--texts", required=True, metavar="TEXTS", help="the corpus, one text per line as encoded")
    p.add_argument("--top-k", type=positive_int, default=10, metavar="K", help="how many hits (default: 10)")
    p.add_argument("--json", action="store_true", help="print a JSON list of {corpus_id, score, text}")
    p.add_argument(
        "--multi-index",
        metavar="TOKENS",
        help="late interaction: rescore the dense search's --candidates by MaxSim with their token vectors in TOKENS "
        "(what `numbert encode --multi --file TEXTS -o TOKENS` wrote: OUT.npz or DIR/), best first",
    )
    p.add_argument(
        "--multi-model", metavar="MODEL", help="--multi-index: the multi-vector model (default: --model, e.g. BGE-M3)"
    )
    p.add_argument(
        "--candidates",
        type=positive_int,
        default=100,
        metavar="N",
        help="--multi-index: how many of the dense search's best lines MaxSim rescores (default: 100)",
    )
    add_model(p)
    add_sentence_options(p)
    add_vector_options(p)
    add_dimensions(p)
    add_prompt_options(p)
    p.set_defaults(run=search, long="truncate", stride=None)
