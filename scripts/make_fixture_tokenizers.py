"""Give every tiny fixture checkpoint of tests/fixtures/family/ and tests/fixtures/modern/ a tokenizer, so each is
a complete model directory that reads text (`numbert encode --model tests/fixtures/modern/nomic_bert-ForMaskedLM
hi`). The fixtures have 64 token ids, so each tokenizer has at most 64 pieces: the model's special tokens (at the
ids its config.json names), the letters and a few punctuation marks, in the pipeline of its kind:

    WordPiece (vocab.txt)          distilbert, electra (tests/test_family.py's VOCABULARY), nomic_bert, gte
    byte-level BPE (tokenizer.json) roberta, mpnet, modernbert: ByteLevel, one piece a character, no merges
    Unigram (tokenizer.json)       xlm-roberta, jina_embeddings_v3: NFKC, Metaspace, XLM-R's template

The weights and expected outputs are left as they are (the numerics tests read ids, not text). Run after
scripts/make_family_fixture.py and scripts/make_modern_fixture.py (each calls it):

    python scripts/make_fixture_tokenizers.py      # needs tokenizers
"""

from __future__ import annotations

import json
import string
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
KINDS = {  # model_type -> the tokenizer kind and its special tokens in id order (at the ids the configs name)
    "distilbert": ("wordpiece", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]),
    "electra": ("wordpiece", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]),
    "nomic_bert": ("wordpiece", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]),
    "gte": ("wordpiece", ["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"]),
    "roberta": ("bpe", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]),
    "mpnet": ("bpe", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]),
    "modernbert": ("bpe", ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]),
    "xlm-roberta": ("unigram", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]),
    "jina_embeddings_v3": ("unigram", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]),
}
VOCAB = 64
PUNCTUATION = list(".,!?'-")


def wordpiece(special: list[str]) -> str:
    """vocab.txt: the specials, the letters, the letters as continuations, punctuation and three words (for BERT's
    special tokens, tests/test_family.py's VOCABULARY)."""
    letters = string.ascii_lowercase
    pieces = [*special, *letters, *(f"##{c}" for c in letters), ".", ",", "!", "?", "the", "cat", "sat"]
    return "\n".join(pieces[:VOCAB]) + "\n"


def bpe(special: list[str]) -> str:
    """A byte-level BPE of one piece a character (no merges): the specials, Ġ (the space), the letters, punctuation;
    RoBERTa's template (<s> A </s></s> B </s>) or ModernBERT's ([CLS] A [SEP] B [SEP])."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    pieces = [*special, "Ġ", *string.ascii_lowercase, *string.ascii_uppercase, *PUNCTUATION][:VOCAB]
    tok = Tokenizer(models.BPE(vocab={p: i for i, p in enumerate(pieces)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=special[0] == "<s>", use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, lstrip=s.endswith("mask>")) for s in special])
    if special[0] == "<s>":
        tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), add_prefix_space=True)
    else:
        cls, sep = special.index("[CLS]"), special.index("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
        )
    return tok.to_str()


def unigram(special: list[str]) -> str:
    """A Unigram of single characters and the word boundary ▁, XLM-R's pipeline around it (NFKC in place of its
    Precompiled map, Metaspace, <s> A </s></s> B </s>)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    letters = [(c, -3.0) for c in string.ascii_lowercase] + [(c, -4.0) for c in string.ascii_uppercase]
    vocab = [*((s, 0.0) for s in special[:4]), ("▁", -2.0), *letters, *((p, -5.0) for p in PUNCTUATION)]
    vocab = [*vocab[: VOCAB - 1], (special[4], 0.0)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=special.index("<unk>"), byte_fallback=False))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.add_special_tokens([AddedToken(s, special=True, lstrip=s == "<mask>") for s in special])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return tok.to_str()


def write_tokenizers() -> list[Path]:
    """Write the tokenizer of every family and modern fixture directory; the files written."""
    written = []
    for directory in sorted([*(FIXTURES / "family").iterdir(), *(FIXTURES / "modern").iterdir()]):
        model_type = json.loads((directory / "config.json").read_text(encoding="utf-8"))["model_type"]
        kind, special = KINDS[model_type]
        if kind == "wordpiece":
            target, text = directory / "vocab.txt", wordpiece(special)
        else:
            target, text = directory / "tokenizer.json", globals()[kind](special)
            text = json.dumps(json.loads(text), indent=1, ensure_ascii=False) + "\n"
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def main() -> None:
    written = write_tokenizers()
    size = sum(f.stat().st_size for f in written)
    print(f"wrote {len(written)} tokenizers ({size / 1e3:.0f} kB)", file=sys.stderr)


if __name__ == "__main__":
    main()
