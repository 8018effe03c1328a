"""`numbert tokenize`: WordPiece tokens and their ids.

    numbert tokenize "Here is the sentence I want embeddings for."
    numbert tokenize --file sentences.txt > tokens.tsv
    numbert tokenize --json < sentences.txt > tokens.jsonl

One TEXT prints a table, a token and its id per row, as the tutorials do. Texts from --file or
stdin (or several TEXTs) print one line per input line, in order: the tokens, a tab, the ids.
"""

from __future__ import annotations

import argparse
import json
import sys

from .common import Failure, add_model, utf8_text
from .files import input_lines


def tokenize(args: argparse.Namespace) -> None:
    """Print each text's tokens and ids: a table for one TEXT, else one line per text (or JSON lines)."""
    from .. import Tokenizer

    if args.pair is not None and len(args.text) != 1:
        raise Failure("--pair goes with one TEXT argument")
    lines = input_lines(args)  # opens the input now, so a missing file fails before the vocabulary loads
    tokenizer = Tokenizer.from_pretrained(args.model)
    table = len(args.text) == 1 and args.text != ["-"] and not args.json
    for text in lines:
        enc = tokenizer.encode(text, args.pair)
        if args.json:
            print(
                json.dumps(
                    {
                        "tokens": enc.tokens,
                        "ids": enc.ids,
                        "type_ids": enc.type_ids,
                        "offsets": enc.offsets,
                        "word_ids": enc.word_ids,
                    },
                    ensure_ascii=False,
                )
            )
        elif table:
            for token, id_ in zip(enc.tokens, enc.ids):
                print(f"{token:<12} {id_:>6}")
        else:
            print(" ".join(enc.tokens) + "\t" + " ".join(map(str, enc.ids)))
        if not args.text:
            sys.stdout.flush()  # a line of input, a line of output: usable interactively and in pipes


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert tokenize`."""
    p = commands.add_parser(
        "tokenize",
        help="print the WordPiece tokens and ids of texts",
        description="Print the WordPiece tokens of each text with their vocabulary ids: "
        "a table for one TEXT; for --file or stdin, one line per input line "
        "(tokens, a tab, ids), or one JSON object per line with --json.",
    )
    p.add_argument(
        "text",
        nargs="*",
        type=utf8_text,
        metavar="TEXT",
        help="texts to tokenize (default: the lines of --file or stdin; '-' for stdin)",
    )
    p.add_argument("--file", "-f", metavar="F", help="read one text per line from F ('-' for stdin)")
    p.add_argument(
        "--pair", type=utf8_text, metavar="TEXT_B", help="a second segment for one TEXT: [CLS] TEXT [SEP] TEXT_B [SEP]"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print tokens, ids, type ids, offsets and word ids as JSON, one object per text",
    )
    add_model(p)
    p.set_defaults(run=tokenize)
