"""`numbert rerank`: a cross-encoder orders documents for a query, best first.

    numbert rerank "How many people live in Berlin?" --file passages.txt --model ./ms-marco-MiniLM-L6-v2
    numbert rerank "capital of France" --top-k 3 --json < passages.txt
    numbert rerank "capital of France" --long window --file long-documents.txt
    numbert rerank "capital of France" --model Qwen/Qwen3-Reranker-0.6B --prompt "Find the capital" < passages.txt

The documents are the lines of --file (or stdin). Each result is a line `score <TAB> index <TAB> document`
(index: the document's 0-based line), or with --json a JSON object {"corpus_id", "score", "text"}, as
sentence-transformers' CrossEncoder.rank returns them.
"""

from __future__ import annotations

import argparse

from .common import add_model, fixed, load_model, non_negative_int, positive_int, utf8_text
from .files import input_lines
from .tasks import emit


def rerank(args: argparse.Namespace) -> None:
    """The documents, best first: all, or the --top-k best."""
    documents = list(input_lines(args))
    model = load_model(args.model)
    results = model.rerank(
        args.query,
        documents,
        top_k=args.top_k,
        raw_scores=args.raw_scores,
        batch_size=args.batch_size,
        return_documents=True,
        long=args.long,
        stride=args.stride,
        prompt=args.prompt,
    )
    for r in results:
        if args.json:
            emit(r)
        else:
            print(f"{fixed(r['score'])}\t{r['corpus_id']}\t{r['text']}", flush=True)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert rerank`."""
    p = commands.add_parser(
        "rerank",
        help="order documents for a query (a cross-encoder with one label, or a Qwen3-Reranker)",
        description="Print the documents (the lines of --file or stdin) best first for QUERY, each as "
        "'score <TAB> index <TAB> document' (index: its 0-based line), scored as sentence-transformers' "
        "CrossEncoder.rank scores them.",
    )
    p.add_argument("query", type=utf8_text, metavar="QUERY")
    p.add_argument("--file", "-f", metavar="F", help="the documents, one per line ('-' for stdin, the default)")
    p.add_argument("--top-k", "-k", type=positive_int, metavar="K", help="print the K best only (default: all)")
    p.add_argument("--raw-scores", action="store_true", help="the classifier's logits, without the activation")
    p.add_argument(
        "--long",
        choices=("truncate", "window"),
        default="truncate",
        help="a document too long for the model: cut it, as CrossEncoder does, or score it by its best "
        "window (default: truncate)",
    )
    p.add_argument(
        "--stride",
        type=non_negative_int,
        metavar="N",
        help="tokens shared by neighbouring windows with --long window (default: a quarter of the model's length)",
    )
    p.add_argument(
        "--prompt",
        type=utf8_text,
        metavar="TEXT",
        help="CrossEncoder.predict's prompt: put before the query, or a decoder reranker's instruction "
        "(Qwen3-Reranker: its template's system message; default its own)",
    )
    p.add_argument("--batch-size", type=positive_int, default=32, metavar="N", help="pairs per forward pass")
    p.add_argument("--json", action="store_true", help='one JSON object {"corpus_id", "score", "text"} per line')
    add_model(p)
    p.set_defaults(run=rerank, text=[])
