"""Section 2: a corpus of real English sentences from the docstrings of Python's standard library.

`stdlib_docstrings` is also the corpus of scripts/bench_tokenizer.py (one docstring a line)."""

from __future__ import annotations

import ast
import random
import re
import statistics
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

from bench.harness import SEED, Patience, clean_run, cores, log, markdown
from bench.systems import corpus_systems

_NOT_PROSE = re.compile(r"[_{}\[\]<>=|\\`*#@$~^/:;]|\.\.|\b(e\.g|i\.e|etc)\.|\d\.\d")
_SENTENCE_END = re.compile(r"(?<=[a-z][.!?])\s+(?=[A-Z])")
_SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "turtledemo", "ensurepip"}


def stdlib_trees(skip_dirs: set[str] | frozenset[str] = frozenset()) -> Iterator[ast.Module]:
    """The parsed source files of Python's standard library, in a fixed order: parsed, never imported; files
    under a directory named in `skip_dirs` are left out, and files that do not parse."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if not set(p.relative_to(root).parts[:-1]) & skip_dirs)
    for path in files:
        try:
            yield ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def stdlib_docstrings(skip_dirs: set[str] | frozenset[str] = frozenset()) -> Iterator[str]:
    """The docstrings of Python's standard library (modules, classes, functions), in a fixed order
    (`stdlib_trees`)."""
    for tree in stdlib_trees(skip_dirs):
        for node in ast.walk(tree):
            if isinstance(node, _DOCUMENTED):
                yield ast.get_docstring(node) or ""


def stdlib_messages() -> Iterator[str]:
    """The short strings of Python's standard library, in a fixed order: the string literals that are not
    docstrings, on one line, of 2 to 12 words and at most 80 characters, with a letter in every word
    (error messages, help texts, labels: the short texts of a user interface), each once (`stdlib_trees`).
    """
    seen = set()
    for tree in stdlib_trees():
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, _DOCUMENTED) and node.body and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                text, words = node.value, node.value.split()
                if (
                    2 <= len(words) <= 12
                    and len(text) <= 80
                    and "\n" not in text
                    and all(any(c.isalpha() for c in w) for w in words)
                    and text not in seen
                ):
                    seen.add(text)
                    yield text


def stdlib_sentences() -> list[str]:
    """English sentences from the docstrings of Python's standard library, in a fixed order.

    A sentence is kept when it reads as prose: it starts with a capital, ends with . ! or ?, has three
    words or more and no code-like characters. Tests and tools' directories are left out.
    """
    sentences, seen = [], set()
    for docstring in stdlib_docstrings(_SKIP_DIRS):
        for paragraph in re.split(r"\n\s*\n", docstring):
            if ">>>" in paragraph:
                continue
            for s in _SENTENCE_END.split(" ".join(paragraph.split())):
                if (
                    s[:1].isupper()
                    and s[-1] in ".!?"
                    and len(s.split()) >= 3
                    and not _NOT_PROSE.search(s)
                    and s not in seen
                ):
                    seen.add(s)
                    sentences.append(s)
    return sentences


def build_corpus(tokenizer, size: int) -> tuple[list[str], list[int]]:
    """`size` sentences of 3-128 tokens (with [CLS] and [SEP]) in a seeded random order, and their lengths."""
    candidates = stdlib_sentences()
    random.Random(SEED).shuffle(candidates)
    corpus, lengths = [], []
    for s in candidates:
        n = len(tokenizer.encode(s).ids)
        if 3 <= n <= 128:
            corpus.append(s)
            lengths.append(n)
            if len(corpus) == size:
                break
    return corpus, lengths


def padding_overhead(lengths: list[int], batch_size: int) -> float:
    """Tokens computed / real tokens when each batch is padded to its longest sentence."""
    padded = sum(len(b) * max(b) for b in (lengths[i : i + batch_size] for i in range(0, len(lengths), batch_size)))
    return padded / sum(lengths)


def time_corpus(bert, model_dir: Path, args) -> dict:
    """Sentences per second for each system over the corpus, in interleaved slices (A B C A B C ...)."""
    import numpy as np

    corpus, lengths = build_corpus(bert.tokenizer, args.corpus_size)
    funcs = corpus_systems(bert, model_dir, args.batch_size, onnx=not args.no_ort)
    vectors = {n: f(corpus[:64]) for n, f in funcs.items()}  # warm-up, and the same vectors?
    reference = vectors["transformers sorted"]
    cosine = lambda a, b: (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    agreement = {n: float(cosine(v, reference).min()) for n, v in vectors.items() if n != "transformers sorted"}

    slices = [corpus[i :: args.corpus_slices] for i in range(args.corpus_slices)]  # each slice: all lengths
    slice_lengths = [lengths[i :: args.corpus_slices] for i in range(args.corpus_slices)]
    log(f"  corpus: {len(corpus)} sentences in {len(slices)} interleaved slices, {', '.join(funcs)}")

    def timed(f, part) -> float:
        time.sleep(args.gap)
        start = time.perf_counter()
        f(part)
        return time.perf_counter() - start

    seconds, others, patience = {n: 0.0 for n in funcs}, [], Patience(args.wait_idle)
    for i, part in enumerate(slices):
        for n, f in funcs.items():
            t, cores = clean_run(lambda f=f, part=part: timed(f, part), patience, f"corpus slice {i + 1}, {n}")
            seconds[n] += t
            others.append(cores)
    rate = {n: len(corpus) / s for n, s in seconds.items()}
    padded = lambda order: (
        sum(padding_overhead(order(ls), args.batch_size) * sum(ls) for ls in slice_lengths) / sum(lengths)
    )
    by_characters = [  # sentence-transformers sorts a call's texts by length in characters, longest first
        [n for _, n in sorted(zip(part, ls), key=lambda p: -len(p[0]))] for part, ls in zip(slices, slice_lengths)
    ]
    st_padding = sum(padding_overhead(ls, args.batch_size) * sum(ls) for ls in by_characters) / sum(lengths)
    padding = {  # tokens each system computes in its dense layers per real token, as run
        n: 1.0 if n == "numbert" else st_padding if n == "sentence-transformers" else padded(sorted) for n in funcs
    }
    return {
        "sentences": len(corpus),
        "tokens": sum(lengths),
        "median_tokens": statistics.median(lengths),
        "max_tokens": max(lengths),
        "min_tokens": min(lengths),
        "batch_size": args.batch_size,
        "padding_input_order": padded(list),
        "padding_sorted": padded(sorted),  # as run, slice by slice
        "padding": padding,
        "sentences_per_s": rate,
        "seconds": seconds,
        "min_cosine_vs_transformers": agreement,
        "others_cores": None if None in others else statistics.mean(others),
        "ratio_transformers": rate["numbert"] / rate["transformers sorted"],
        "ratio_onnxruntime": rate["numbert"] / rate["onnxruntime sorted"] if "onnxruntime sorted" in rate else None,
        "ratio_st": rate["numbert"] / rate["sentence-transformers"] if "sentence-transformers" in rate else None,
    }


def corpus_table(c: dict) -> str:
    rates = c["sentences_per_s"]
    agreement = c["min_cosine_vs_transformers"]
    body = [
        [
            n,
            f"{r:.1f}",
            f"{c['seconds'][n]:.1f}",
            f"{rates['numbert'] / r:.2f}",
            f"{c['padding'][n]:.2f}",
            f"{agreement[n]:.4f}" if n in agreement else "(reference)",
        ]
        for n, r in rates.items()
    ]
    return (
        f"{c['sentences']} sentences, {c['tokens']} tokens with [CLS]/[SEP]: median {c['median_tokens']:g}, "
        f"max {c['max_tokens']} tokens per sentence. Padding (computed / real tokens) in batches of "
        f"{c['batch_size']}: {c['padding_input_order']:.2f} in input order, "
        f"{c['padding_sorted']:.2f} sorted by length; numbert's layers compute the real tokens only "
        f"(its packed batches: 1.00). Other processes used "
        f"{cores(c['others_cores'])} cores on average meanwhile.\n\n"
        + markdown(
            ["system", "sentences/s", "seconds", "numbert speed-up", "padded tokens per real token", "min cosine"],
            body,
        )
    )
