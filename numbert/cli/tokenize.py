"""`numbert tokenize`: a text's WordPiece tokens and their ids.

    numbert tokenize "Here is the sentence I want embeddings for."
"""

from __future__ import annotations

import argparse
import json

from .common import add_model


def tokenize(args: argparse.Namespace) -> None:
    """Print the tokens and their ids, one per line, as the tutorials do (or JSON with --json)."""
    from .. import Tokenizer

    tokenizer = Tokenizer.from_pretrained(args.model)
    enc = tokenizer.encode(args.text, args.pair)
    if args.json:
        print(json.dumps({"tokens": enc.tokens, "ids": enc.ids, "type_ids": enc.type_ids,
                          "offsets": enc.offsets, "word_ids": enc.word_ids}, ensure_ascii=False))
        return
    for token, id_ in zip(enc.tokens, enc.ids):
        print(f"{token:<12} {id_:>6,}")


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert tokenize`."""
    p = commands.add_parser("tokenize", help="print the WordPiece tokens and ids of a text",
                            description="Print the WordPiece tokens of TEXT with their vocabulary ids.")
    p.add_argument("text", metavar="TEXT")
    p.add_argument("--pair", metavar="TEXT_B", help="a second segment: [CLS] TEXT [SEP] TEXT_B [SEP]")
    p.add_argument("--json", action="store_true", help="print tokens, ids, type ids, offsets and word ids as JSON")
    add_model(p)
    p.set_defaults(run=tokenize)
