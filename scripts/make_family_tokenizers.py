"""Write the tokenizer.json files of BERT's relatives that tests/test_tokenizer_family.py reads, trained here
on the project's own text, small enough to commit:

    tests/fixtures/roberta_bpe.json    byte-level BPE (tokenizers' BpeTrainer), RoBERTa's pipeline around it
    tests/fixtures/unigram.json        Unigram (tokenizers' UnigramTrainer), Metaspace, NFKC, TemplateProcessing
    tests/fixtures/xlmr_spm.json       a SentencePiece model (the `sentencepiece` package) converted by
                                       transformers' XLMRobertaTokenizer: a real Precompiled charsmap
    tests/fixtures/family_expected.json what the Rust tokenizers give on the test cases (for runs without it)

    HF_HUB_OFFLINE=1 python scripts/make_family_tokenizers.py   # needs tokenizers, transformers, sentencepiece
    python scripts/make_family_tokenizers.py --sweep   # re-check unicode_tables.NEWER_LETTERS / NEWER_NUMBERS
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_tokenizer_parity import CORPUS  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
SPECIAL = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def training_text() -> list[str]:
    """The parity corpus and the standard library's docstrings: several scripts, English mostly."""
    from bench.corpus import stdlib_docstrings  # scripts/bench

    docs = [" ".join(d.split()) for d, _ in zip(stdlib_docstrings(), range(1500))]
    return [*CORPUS * 3, *docs]


def roberta_bpe(lines: list[str]) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(lines, trainer)
    tok.post_processor = processors.RobertaProcessing(
        ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")), trim_offsets=True, add_prefix_space=False
    )
    return tok.to_str()


def unigram(lines: list[str]) -> str:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.Metaspace()]
    )
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=600, special_tokens=["[CLS]", "[SEP]", "<unk>"], unk_token="<unk>")
    tok.train_from_iterator(lines, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return tok.to_str()


def xlmr_spm(lines: list[str]) -> str:
    import sentencepiece as spm
    from transformers.convert_slow_tokenizer import XLMRobertaConverter

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(line.replace("\n", " ") for line in lines), encoding="utf-8")
        spm.SentencePieceTrainer.train(
            input=str(corpus),
            model_prefix=f"{tmp}/spm",
            vocab_size=800,
            model_type="unigram",
            character_coverage=0.9995,
            byte_fallback=False,
            minloglevel=2,
        )
        original = SimpleNamespace(vocab_file=f"{tmp}/spm.model", convert_tokens_to_ids=["<s>", "<pad>", "</s>"].index)
        return XLMRobertaConverter(original).converted().to_str()


def sweep() -> None:
    """Check unicode_tables.NEWER_LETTERS / NEWER_NUMBERS: split "a" + c, "1" + c and "!" + c with the Rust
    ByteLevel pre-tokenizer and with numbert's GPT-2 pattern, for every code point (a few minutes)."""
    from tokenizers import pre_tokenizers

    from numbert.tokenizer.pre_tokenizers import gpt2_pattern

    rust, ours = pre_tokenizers.ByteLevel(add_prefix_space=False), gpt2_pattern()
    differ = [
        f"U+{code:04X} after {probe!r}"
        for code in range(0x110000)
        if not 0xD800 <= code <= 0xDFFF
        for probe in ("a", "1", "!")
        if len(rust.pre_tokenize_str(probe + chr(code))) != len(ours.findall(probe + chr(code)))
    ]
    print(f"{len(differ)} code points split differently" + "".join(f"\n  {d}" for d in differ[:50]))


def write_fixtures(makers: dict) -> None:
    """Each maker's tokenizer.json, trained on training_text(), written compactly as tests/fixtures/NAME.json."""
    lines = training_text()
    for name, make in makers.items():
        spec = json.loads(make(lines))
        path = FIXTURES / f"{name}.json"
        path.write_text(json.dumps(spec, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {path} ({path.stat().st_size} bytes)")


def main() -> None:
    if sys.argv[1:] == ["--sweep"]:
        return sweep()
    write_fixtures({"roberta_bpe": roberta_bpe, "unigram": unigram, "xlmr_spm": xlmr_spm})
    from test_tokenizer_family import write_expected

    write_expected()


if __name__ == "__main__":
    main()
