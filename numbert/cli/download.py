"""`numbert download`: a hub model's files, those numbert reads, into a directory to carry to a machine without the hub.

    numbert download sentence-transformers/all-MiniLM-L6-v2 ./all-MiniLM-L6-v2
    numbert download BAAI/bge-m3 ./bge-m3 --revision 5617a9f61b028005a4858fdac845db406aefb181

Then, on the other machine: `numbert encode --model ./all-MiniLM-L6-v2 ...` (docs/offline.md). Prints each file
written, then one line with the directory, its size and what to pass.
"""

from __future__ import annotations

import argparse


def download(args: argparse.Namespace) -> None:
    """Fetch the files of args.repo_id that numbert reads into args.directory."""
    from ..checkpoint.hub import download as fetch

    files = fetch(args.repo_id, args.directory, revision=args.revision)
    for file in files:
        print(file)
    size = sum(file.stat().st_size for file in files)
    print(f"{args.repo_id}: {len(files)} files, {size / 1e6:.1f} MB in {args.directory}; use --model {args.directory}")


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert download`."""
    p = commands.add_parser(
        "download",
        help="fetch a hub model's files into a directory, for a machine without the hub",
        description="Fetch the files numbert reads of a Hugging Face hub model (config, tokenizer, one weight "
        "format: safetensors when there are both, the sentence-transformers modules, ColBERT and BGE-M3 heads) into "
        "DIR, on a machine that reaches the hub; copy DIR to the machine without it and pass --model DIR there.",
    )
    p.add_argument("repo_id", metavar="REPO_ID", help="the model's hub id, e.g. sentence-transformers/all-MiniLM-L6-v2")
    p.add_argument("directory", metavar="DIR", help="the directory to write the files into (created if need be)")
    p.add_argument("--revision", metavar="R", help="a branch, tag or commit of the repository (default: main)")
    p.set_defaults(run=download)
