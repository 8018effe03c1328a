"""Write the tokenizer.json files of the decoder-shaped embedders that tests/test_tokenizer_gemma_qwen.py reads, trained
here on the project's own text (tokenizers' trainers), small enough to commit, each in its model's exact pipeline as
transformers 5's converters build it (convert_slow_tokenizer.py's GemmaConverter and Qwen2Converter,
models/gemma/tokenization_gemma.py, models/qwen2/tokenization_qwen2.py):

    tests/fixtures/gemma_bpe.json   Gemma's (EmbeddingGemma, Gemma 3, mmBERT): normalizer Replace " " -> "▁",
                                    pre-tokenizer Split " " (merged with the previous), BPE with byte fallback (all
                                    256 <0xNN> pieces), fuse_unk and <unk>; decoder Replace "▁" -> " ", ByteFallback,
                                    Fuse; added tokens <pad> <eos> <bos> <unk> <mask> <start_of_turn> <end_of_turn>
                                    (special) and SentencePiece's user-defined pieces (not special); <bos> $A <eos>
    tests/fixtures/qwen_bpe.json    Qwen's (Qwen2, Qwen3, Qwen3-Embedding): NFC, Split with Qwen2's pattern
                                    (isolated) then ByteLevel without its regex, byte-level BPE; decoder ByteLevel;
                                    added tokens <|endoftext|> <|im_start|> <|im_end|> (special) and <think>
                                    </think> (not special); Qwen3-Embedding's template $A <|endoftext|>
    tests/fixtures/gemma_qwen_expected.json   what the Rust library gives on the test cases (runs without it)

    HF_HUB_OFFLINE=1 python scripts/make_gemma_qwen_tokenizers.py   # needs tokenizers
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

from make_family_tokenizers import write_fixtures  # noqa: E402

GEMMA_SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"]
GEMMA_USER_DEFINED = ["\n\n", "\t\t", "▁▁", "<table>", "<h1>"]  # SentencePiece's user-defined pieces (not special)
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_OTHER = ["<think>", "</think>"]  # added tokens that are not special (Qwen3's)


def added(content: str, token_id: int, special: bool) -> dict:
    return dict(
        id=token_id, content=content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special
    )


def gemma_bpe(lines: list[str]) -> str:
    """Pieces trained word by word ("▁" starting a word, as SentencePiece's split_by_whitespace), then Gemma's
    pipeline set around them: the vocabulary its converter writes (the special tokens first, the bytes, the pieces)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=900, limit_alphabet=120, show_progress=False))
    trained = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, list) else m.split(" ") for m in trained["merges"]]
    pieces = [t for t, _ in sorted(trained["vocab"].items(), key=lambda item: item[1])]
    merges += [["▁", "▁"], ["▁▁", "▁▁"], ["\n", "\n"]]  # whitespace runs (SentencePiece's whitespace-only pieces)
    for piece in ("▁▁", "▁▁▁▁", "\n", "\n\n", "\t"):
        pieces.append(piece)
    order = [*GEMMA_SPECIAL, *GEMMA_USER_DEFINED, *(f"<0x{b:02X}>" for b in range(256)), *pieces]
    vocab: dict[str, int] = {}
    for token in order:
        vocab.setdefault(token, len(vocab))
    tokens = [added(t, vocab[t], True) for t in GEMMA_SPECIAL] + [added(t, vocab[t], False) for t in GEMMA_USER_DEFINED]
    gemma = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m) for m in merges], byte_fallback=True))
    gemma.normalizer = normalizers.Replace(" ", "▁")
    gemma.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    gemma.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    gemma.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>",
        pair="<bos> $A <eos> <bos>:1 $B:1 <eos>:1",
        special_tokens=[("<bos>", vocab["<bos>"]), ("<eos>", vocab["<eos>"])],
    )
    spec = json.loads(gemma.to_str())
    spec["added_tokens"] = tokens
    spec["model"].update(unk_token="<unk>", fuse_unk=True, byte_fallback=True)
    return json.dumps(spec)


def qwen_bpe(lines: list[str]) -> str:
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=900, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(lines, trainer)
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in QWEN_SPECIAL])
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in QWEN_OTHER])
    eos = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(
        single="$A:0 <|endoftext|>:0",
        pair="$A:0 <|endoftext|>:0 $B:1 <|endoftext|>:1",
        special_tokens=[("<|endoftext|>", eos)],
    )
    spec = json.loads(tok.to_str())
    spec["model"].update(continuing_subword_prefix="", end_of_word_suffix="")  # as Qwen's file writes them
    return json.dumps(spec)


def main() -> None:
    write_fixtures({"gemma_bpe": gemma_bpe, "qwen_bpe": qwen_bpe})
    from test_tokenizer_gemma_qwen import write_expected

    write_expected()


if __name__ == "__main__":
    main()
