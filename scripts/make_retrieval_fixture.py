"""Write the retrieval fixtures, for tests/test_rerank.py and tests/test_search.py to check numbert without torch:

tests/fixtures/cross_encoder/      a tiny BertForSequenceClassification (1 label, random weights, seed 0,
                                   hidden 32, 2 layers) that transformers saves, with a vocabulary of the
                                   word pieces the test texts need (so it stays small)
tests/fixtures/retrieval_expected.npz
    predict, predict_raw       CrossEncoder.predict of test_rerank.PAIRS (sigmoid, and the logits)
    rank_ids, rank_scores      CrossEncoder.rank(test_rerank.QUERY, test_rerank.DOCUMENTS)
    queries, corpus            fixed float32 matrices (5 x 16, 300 x 16)
    cos_ids, cos_scores        util.semantic_search(queries, corpus, top_k=5)
    dot_ids, dot_scores        ... with score_function=util.dot_score
    ranges                     a (2, 16) calibration range
    quantized_<p>              quantize_embeddings(corpus[:20], precision=p) for every precision
    quantized_<p>_ranges       ... with ranges= (int8 and uint8)

HF_HUB_OFFLINE=1 python scripts/make_retrieval_fixture.py      # needs torch and sentence-transformers
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers import minilm_or_exit  # noqa: E402
from test_rerank import DOCUMENTS, PAIRS, QUERY  # noqa: E402

from numbert.pipeline.quantization import CALIBRATED, PRECISIONS  # noqa: E402
from numbert.tokenizer import Tokenizer  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
CROSS_ENCODER = FIXTURES / "cross_encoder"
EXPECTED = FIXTURES / "retrieval_expected.npz"


def small_vocabulary(vocab_path: Path, texts: list[str]) -> list[str]:
    """The special tokens and every word piece bert-base-uncased's vocabulary cuts `texts` into. Greedy
    longest-match WordPiece cuts each word the same with this subset: the piece it chose is in it, and no
    longer one is."""
    tokenizer = Tokenizer.from_vocab(vocab_path)
    pieces = {piece for text in texts for piece in tokenizer.encode(text, add_special_tokens=False).tokens}
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(pieces - {"[UNK]"})]


def write_cross_encoder(directory: Path, vocab: list[str]) -> None:
    """A 1-label cross-encoder as tests/test_rerank.py's `cross_encoder_dir` makes it, on `vocab`."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_attention_heads=4,
        num_hidden_layers=2,
        intermediate_size=37,
        max_position_embeddings=64,
        num_labels=1,
        pad_token_id=0,
    )
    model = transformers.BertForSequenceClassification(config).eval()
    with torch.no_grad():
        model.classifier.weight *= 100  # so that the scores spread
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    model.save_pretrained(directory)
    transformers.BertTokenizer(str(directory / "vocab.txt")).save_pretrained(directory)


def cross_encoder_outputs(directory: Path) -> dict[str, np.ndarray]:
    import torch
    from sentence_transformers import CrossEncoder

    reference = CrossEncoder(str(directory), device="cpu")
    ranked = reference.rank(QUERY, DOCUMENTS)
    return {
        "predict": reference.predict(PAIRS, convert_to_numpy=True),
        "predict_raw": reference.predict(PAIRS, activation_fn=torch.nn.Identity()),
        "rank_ids": np.array([hit["corpus_id"] for hit in ranked]),
        "rank_scores": np.array([hit["score"] for hit in ranked], np.float32),
    }


def search_outputs() -> dict[str, np.ndarray]:
    from sentence_transformers import util
    from sentence_transformers.quantization import quantize_embeddings

    rng = np.random.default_rng(0)
    corpus = rng.normal(size=(300, 16)).astype(np.float32)
    corpus[7] = corpus[3]  # equal rows, equal scores
    queries = np.concatenate([rng.normal(size=(4, 16)), corpus[3:4]]).astype(np.float32)
    out: dict[str, np.ndarray] = {"queries": queries, "corpus": corpus}
    for name, score_function in (("cos", util.cos_sim), ("dot", util.dot_score)):
        hits = util.semantic_search(queries, corpus, top_k=5, score_function=score_function)
        out[f"{name}_ids"] = np.array([[hit["corpus_id"] for hit in query] for query in hits])
        out[f"{name}_scores"] = np.array([[hit["score"] for hit in query] for query in hits], np.float32)
    vectors = corpus[:20]
    out["ranges"] = ranges = np.stack([corpus.min(0), corpus.max(0)]) * np.float32(0.8)  # some values clip
    for precision in PRECISIONS:
        out[f"quantized_{precision}"] = quantize_embeddings(vectors, precision=precision)
        if precision in CALIBRATED:
            out[f"quantized_{precision}_ranges"] = quantize_embeddings(vectors, precision=precision, ranges=ranges)
    return out


def main() -> None:
    vocab_path = minilm_or_exit() / "vocab.txt"
    write_cross_encoder(CROSS_ENCODER, small_vocabulary(vocab_path, [QUERY, *DOCUMENTS, *sum(PAIRS, ())]))
    np.savez_compressed(EXPECTED, **cross_encoder_outputs(CROSS_ENCODER), **search_outputs())
    size = sum(p.stat().st_size for p in [EXPECTED, *CROSS_ENCODER.iterdir()])
    print(f"wrote {CROSS_ENCODER} and {EXPECTED} ({size // 1024} KB)")


if __name__ == "__main__":
    main()
