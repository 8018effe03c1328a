"""`numbert neighbors` and `numbert similarity`: which tokens, which texts, are close.

numbert neighbors bank -k 5
numbert similarity "A man is eating food." "A man is eating a meal."
"""

from __future__ import annotations

import argparse
import json

from .common import add_model, add_sentence_options, fixed, load_model, positive_int, sentence_options, utf8_text


def neighbors(args: argparse.Namespace) -> None:
    """Print the vocabulary entries nearest to WORD by cosine of the token embeddings."""
    found = load_model(args.model).nearest_tokens(args.word, k=args.k)
    if args.json:
        print(json.dumps([n._asdict() for n in found], ensure_ascii=False))
        return
    for n in found:
        print(f"{n.token:<16} {fixed(n.similarity, 4)}")


def similarity(args: argparse.Namespace) -> None:
    """Print the cosine similarity of the two texts' sentence vectors."""
    print(fixed(load_model(args.model).similarity(args.text_a, args.text_b, **sentence_options(args))))


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert neighbors` and `numbert similarity`."""
    p = commands.add_parser(
        "neighbors",
        help="the vocabulary entries nearest to a word",
        description="Print the k vocabulary entries whose token embeddings (the raw "
        "embedding rows, no context) are closest to WORD's by cosine.",
    )
    p.add_argument("word", type=utf8_text, metavar="WORD")
    p.add_argument("-k", type=positive_int, default=10, metavar="N", help="how many (default: 10)")
    p.add_argument("--json", action="store_true", help="print a JSON list of {token, id, similarity}")
    add_model(p)
    p.set_defaults(run=neighbors)

    p = commands.add_parser(
        "similarity",
        help="the cosine similarity of two texts",
        description="Print the cosine similarity of the sentence vectors of TEXT_A and TEXT_B.",
    )
    p.add_argument("text_a", type=utf8_text, metavar="TEXT_A")
    p.add_argument("text_b", type=utf8_text, metavar="TEXT_B")
    add_model(p)
    add_sentence_options(p)
    p.set_defaults(run=similarity)
