"""scripts/same_numbers.py's child: the arrays of one checkout (its PYTHONPATH), saved to argv[1] as .npz."""

import json
import sys
import tempfile

import numpy as np

import numbert
from numbert.testing import BertConfig, packaged_minilm, write_random_bert

corpus = json.loads(sys.stdin.read())
arrays = {"corpus": numbert.load(str(packaged_minilm())).embed(corpus, progress=False)}
with tempfile.TemporaryDirectory() as tmp:
    minilm = packaged_minilm()
    base = numbert.load(str(write_random_bert(f"{tmp}/base", minilm / "vocab.txt", BertConfig(), seed=0)))
    texts = ["Hello world.", "The quick brown fox jumps over the lazy dog, twice.", "", "a " * 60]
    out = base(texts)
    arrays["bert_base_hidden_states"] = out.hidden_states
    arrays["bert_base_pooler"] = out.pooler_output
np.savez(sys.argv[1], **arrays)
