"""Write the tokenizer.json files of the modern family that tests/test_modern_text.py reads, trained here on the
project's own text (tokenizers' trainers), small enough to commit, each in its model's exact pipeline:

    tests/fixtures/modernbert_bpe.json      ModernBERT's (OLMo's byte-level BPE): NFC, ByteLevel without a prefix
                                            space, BPE with empty subword prefix and suffix, [CLS] $A [SEP] (pairs
                                            [CLS] $A [SEP] $B [SEP], type ids 0), [MASK] taking the space on its left
    tests/fixtures/nomic_wordpiece.json     NomicBERT's and GTE v1.5's (bert-base-uncased's): BertNormalizer,
                                            BertPreTokenizer, WordPiece, [CLS] $A [SEP] $B:1 [SEP]:1
    tests/fixtures/modern_tokenizers_expected.json   what the Rust library gives on the test cases (runs without it)

gte-multilingual's and jina-embeddings-v3's tokenizer is XLM-RoBERTa's (Precompiled, Metaspace, Unigram):
tests/fixtures/xlmr_spm.json, written by scripts/make_family_tokenizers.py.

    HF_HUB_OFFLINE=1 python scripts/make_modern_tokenizers.py   # needs tokenizers
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

from make_family_tokenizers import write_fixtures  # noqa: E402

SPECIAL = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]


def modernbert_bpe(lines: list[str]) -> str:
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(lines, trainer)
    tok.add_special_tokens([AddedToken("[MASK]", lstrip=True, normalized=False, special=True)])
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    spec = json.loads(tok.to_str())
    spec["model"].update(continuing_subword_prefix="", end_of_word_suffix="")  # as ModernBERT's file writes them
    return json.dumps(spec)


def nomic_wordpiece(lines: list[str]) -> str:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.train_from_iterator(lines, trainers.WordPieceTrainer(vocab_size=700, special_tokens=SPECIAL))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return tok.to_str()


def main() -> None:
    write_fixtures({"modernbert_bpe": modernbert_bpe, "nomic_wordpiece": nomic_wordpiece})
    from test_modern_text import write_expected

    write_expected()


if __name__ == "__main__":
    main()
