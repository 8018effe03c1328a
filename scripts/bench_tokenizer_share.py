#!/usr/bin/env python
"""How much of `embed`'s time is tokenizing, for each family model at its usual shape.

    python scripts/bench_tokenizer_share.py                   # 300 corpus sentences per model
    python scripts/bench_tokenizer_share.py --size 1000 --models minilm,modernbert

For each model: the real sentences of scripts/bench's corpus tokenized by a fresh (cold) tokenizer, as `embed`
plans them (one text at a time, cut to the model's length), against `embed` of the same sentences through a second
fresh tokenizer (tokenizing included), mean pooling, batches of 32, the process's BLAS threads. all-MiniLM-L6-v2 is
the packaged checkpoint; the modern family's encoders are random weights at their published base shapes (ModernBERT
-base, nomic-embed-text-v1.5, gte-base-en-v1.5, jina-embeddings-v3) with the committed fixture tokenizers of their
kinds (tests/fixtures: byte-level BPE, WordPiece, Unigram + Precompiled), whose small vocabularies cut words into
more pieces than the real ones do: their tokenizing is, if anything, overstated. The share is tokenize / embed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.corpus import build_corpus  # noqa: E402
from bench.harness import blas_info, cpu_name, markdown  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
MODERNBERT_IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
FAMILY = {  # name -> (tokenizer fixture, config at the published shape)
    "modernbert": (
        "modernbert_bpe.json",
        dict(model_type="modernbert", **{**BASE, "num_hidden_layers": 22, "intermediate_size": 1152}, **MODERNBERT_IDS),
    ),
    "nomic_bert": ("nomic_wordpiece.json", dict(model_type="nomic_bert", pad_token_id=0, **BASE)),
    "gte": ("nomic_wordpiece.json", dict(model_type="gte", pad_token_id=0, **BASE)),
    "jina_embeddings_v3": (
        "xlmr_spm.json",
        dict(
            model_type="jina_embeddings_v3",
            pad_token_id=1,
            hidden_size=1024,
            num_hidden_layers=24,
            num_attention_heads=16,
            intermediate_size=4096,
        ),
    ),
}


def family_pipeline(name: str):
    """A random-weight encoder of the model's base shape with its kind's fixture tokenizer, and a tokenizer maker."""
    from numbert.model.config import BertConfig
    from numbert.model.encoder import Encoder
    from numbert.pipeline.pipeline import Pipeline
    from numbert.testing import random_weights
    from numbert.tokenizer import Tokenizer

    fixture, fields = FAMILY[name]
    make = lambda: Tokenizer.from_tokenizer_json(FIXTURES / fixture)
    config = BertConfig.from_dict({**fields, "vocab_size": make().vocab_size, "max_position_embeddings": 512})
    return (lambda: Pipeline(Encoder(config, random_weights(config, seed=0)), make())), make


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=300)
    p.add_argument("--models", default="minilm," + ",".join(FAMILY))
    args = p.parse_args()
    import numbert
    from numbert.pipeline.embedding import embed
    from numbert.testing import packaged_minilm
    from numbert.tokenizer import Tokenizer

    info = blas_info()
    print(f"CPU: {cpu_name()}; NumPy {info['numpy']}, {info['library']} core {info['core']}")
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}; load average {os.getloadavg()}", flush=True)
    minilm = numbert.load(packaged_minilm())
    texts, _ = build_corpus(minilm.tokenizer, args.size)
    rows = []
    for name in args.models.split(","):
        if name == "minilm":
            load = lambda: numbert.load(packaged_minilm())
            make = lambda: Tokenizer.from_pretrained(packaged_minilm())
        else:
            load, make = family_pipeline(name)
        model = load()
        recipe = model.recipe(pooling="mean")
        limit = recipe.max_length
        tokenizer = make()
        start = time.perf_counter()
        tokens = sum(len(tokenizer.encode(recipe.prepare(t), max_length=limit, truncation=True)) for t in texts)
        tokenize = time.perf_counter() - start
        model = load()  # a fresh tokenizer: embed tokenizes cold too
        start = time.perf_counter()
        embed(model, texts, recipe=recipe, progress=False)
        whole = time.perf_counter() - start
        rows.append(
            [name, f"{tokens / len(texts):.1f}", f"{tokenize:.2f}", f"{whole:.2f}", f"{100 * tokenize / whole:.1f} %"]
        )
        print(rows[-1], file=sys.stderr, flush=True)
    print(f"{len(texts)} sentences; load average after {os.getloadavg()}")
    print(markdown(["model", "tokens a sentence", "tokenize s (cold)", "embed s", "tokenizing's share"], rows))


if __name__ == "__main__":
    main()
