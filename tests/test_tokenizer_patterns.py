"""tokenizer.json patterns (numbert/tokenizer/patterns.py): Oniguruma's dialect, read as the Rust `tokenizers` library
reads it, and matched in bounded time.

- The dialect: every case (line anchors, POSIX brackets, \\h, \\R, possessive and atomic groups, empty matches,
  isolated options, ...) through a Split of each behavior and a Replace, against the Rust library live and against
  its committed outputs (patterns_expected.json) without it; Oniguruma's character sets over a sample of code
  points; every pattern of the tokenizer.json files the tests use, on the corpus.
- The bound: a pattern that backtracks catastrophically ends in a one-line PatternTimeout naming the file, the
  field and the pattern, from the API and the command line; served, it answers 422 while /health and another
  model answer at once, and SIGTERM stops the server.
- GPT-2's split by character classes (gpt2_split) equal to its pattern of all of Unicode.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import string
import sys
import threading
import time
import unicodedata
from pathlib import Path

import httpx
import pytest
from helpers import ServerProcess, bounded, run_limited
from test_tokenizer_parity import CORPUS, generated_lines

import numbert
from numbert.tokenizer import PatternTimeout, Tokenizer, patterns, pre_tokenizers
from numbert.tokenizer.normalizers import Normalized, Replace
from numbert.tokenizer.patterns import DeadlinePassed, Pattern, translate
from numbert.tokenizer.pre_tokenizers import Split

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = FIXTURES / "patterns_expected.json"
BEHAVIORS = {  # the Python binding's names -> tokenizer.json's
    "removed": "Removed",
    "isolated": "Isolated",
    "merged_with_previous": "MergedWithPrevious",
    "merged_with_next": "MergedWithNext",
    "contiguous": "Contiguous",
}
CASES = [  # (pattern, text): the issue's dialect cases first, then the rest of Oniguruma's syntax numbert reads
    ("^ +", "a\n  b\n c"),
    ("$", "a\nb\n"),
    ("^", "a\n"),
    ("[[:digit:]]", "1٣x²"),
    ("", "ab"),
    ("x*", "axb"),
    (r"^|\w+", "foo"),
    (r"\h+", "0aG;ff"),
    (r"\H", "0aG;"),
    (r"\R", "a\r\nb\rc\x85d\n"),
    (r"a++b", "aab"),
    (r"a*+a", "aaa"),
    (r"(?>a+)b", "aab"),
    ("[[:alpha:]]", "aé1\u0301"),
    ("[[:^alpha:]]", "a1 "),
    ("[[:space:]]", "a\x85b\u3000c\x1cd"),
    ("[[:punct:]]", "a,b$c_d"),
    ("[[:print:]]", "a \x01\u3000"),
    ("[[:graph:]]", "a \x01b"),
    ("[[:word:]]", "²_a"),
    ("[[:cntrl:]]", "a\x01\u200b"),
    ("[[:blank:]]", "a\tb c\u3000"),
    ("[[:xdigit:]]", "0aGf"),
    ("[[:upper:]][[:lower:]]", "Ab"),
    (r"\Z", "a\n"),
    (r"\z", "a\n"),
    (r"\Ab", "bb"),
    (r"\Gb", "bb"),
    (r"b\Kc", "bc"),
    (r"\x{41}", "ABA"),
    (r"\e", "\x1b"),
    (r"\cA", "\x01"),
    (r"(?m).", "a\nb"),
    ("ab(?i)c|d", "abC D abD"),
    (r"(?i:a)b", "AbAB"),
    ("(?i)ß", "SS"),
    (r"\p{^L}", "a1"),
    (r"\p{Alpha}", "aé1\u0301"),
    (r"[a-z&&[^aeiou]]", "abe"),
    ("[+--]", "+,-."),
    ("[|]", "a|b"),
    ("[a-]", "a-"),
    ("x{", "x{"),
    (r"a{,2}", "aaa"),
    (r"a{2}", "aaaaa"),
    (r"a{2,}?", "aaaaa"),
    (r"\N", "a\nb"),
    (r"\O", "a\nb"),
    (r"\b", "ab cd"),
    (r"\B", "ab cd"),
    (r"\w+", "²_a b"),
    (r"[\w]", "²a_."),
    (r"\W", "a.b c"),
    (r"\d", "²1٣"),
    (r"\s", "a\x1cb\x85c\xa0d"),
    (r"\S+", "a\x1cb c"),
    (r"(?x) a b ", "ab"),
    ("a|", "ab"),
    ("a?", "baab"),
    ("(?=a)", "baab"),
    ("$|a", "ab\n"),
    ("^$", "a\n\nb\n"),
    ("(?<=a)", "aaa"),
    (r"(?<n>a)\k<n>", "aa"),
    (r"(\d)(\d)\2", "1223"),
    (r"\p{L}+", "héllo wörld 1"),
    (r"\p{N}", "1½²"),
    (r" {2,}", "a  b     c d"),
]
LITERALS = [("", "ab"), (" ", "a  b"), ("ab", "xabab"), ("a.", "a.ab")]  # {"String": ...} patterns


def our_split(source: str, text: str, behavior: str, literal: bool = False) -> list:
    words = Split(Pattern(source, literal, "test"), BEHAVIORS[behavior], None)(Normalized.of(text))
    return [[w.text, list(w.original(0, len(w.text)))] for w in words]


def our_replace(source: str, text: str, literal: bool = False) -> str:
    return Replace(Pattern(source, literal, "test"), "X", None)(Normalized.of(text)).text


def rust_outputs(tokenizers, source: str, text: str, literal: bool = False) -> dict:
    """What the Rust library gives: each behavior's words with offsets, and the Replace by "X"."""
    pattern = source if literal else tokenizers.Regex(source)
    split = {
        b: [[w, list(o)] for w, o in tokenizers.pre_tokenizers.Split(pattern, b).pre_tokenize_str(text)]
        for b in BEHAVIORS
    }
    return {"split": split, "replace": tokenizers.normalizers.Replace(pattern, "X").normalize_str(text)}


def our_outputs(source: str, text: str, literal: bool = False) -> dict:
    split = {b: our_split(source, text, b, literal) for b in BEHAVIORS}
    return {"split": split, "replace": our_replace(source, text, literal)}


def all_cases() -> list[tuple[str, str, bool]]:
    return [(p, t, False) for p, t in CASES] + [(p, t, True) for p, t in LITERALS]


def write_expected() -> None:
    """patterns_expected.json from the Rust library: `python tests/test_tokenizer_patterns.py`."""
    import tokenizers

    cases = [
        {"pattern": p, "text": t, "literal": lit, **rust_outputs(tokenizers, p, t, lit)} for p, t, lit in all_cases()
    ]
    EXPECTED.write_text(
        "[\n" + ",\n".join(json.dumps(c, ensure_ascii=True, separators=(",", ":")) for c in cases) + "\n]\n",
        encoding="utf-8",
    )


# --- the dialect ---------------------------------------------------------------------------------------------


def test_dialect_cases_as_the_rust_library():
    """Each case through a Split of each behavior (words and offsets) and a Replace: what the Rust library gives
    (numbert's `re` reading differed in 8 of the issue's 28 pattern x stage combinations, silently)."""
    tokenizers = pytest.importorskip("tokenizers")
    for source, text, literal in all_cases():
        assert our_outputs(source, text, literal) == rust_outputs(tokenizers, source, text, literal), (source, text)


def test_dialect_cases_as_committed():
    cases = json.loads(EXPECTED.read_text(encoding="utf-8"))
    assert [(c["pattern"], c["text"], c["literal"]) for c in cases] == all_cases()
    for case in cases:
        expected = {"split": case["split"], "replace": case["replace"]}
        assert our_outputs(case["pattern"], case["text"], case["literal"]) == expected, (case["pattern"], case["text"])


SETS = [  # constructs that match one character: Oniguruma's sets
    *(r"\w", r"[\w]", r"\W", r"[\W]", r"\d", r"\D", r"\s", r"\S", r"\h", r"\H", r"\p{Word}", r"\p{Alpha}", "."),
    *(f"[[:{name}:]]" for name in patterns.POSIX),
    "[[:^punct:]]",
    r"\p{^Print}",
    "(?i)k",
]


def sample_code_points() -> str:
    """Every code point below U+3400 and 4,000 others, each assigned in Python's Unicode tables (14.0: older than
    both engines') and not U+0295, which Unicode 16 moved from Ll to Lo (the `regex` package's tables are newer
    than the Rust crate's Oniguruma)."""
    rng = random.Random(0)
    codes = [*range(0x3400), *rng.sample(range(0x3400, 0x110000), 40_000)]
    chars = [chr(c) for c in codes if unicodedata.category(chr(c)) not in ("Cn", "Cs") and c != 0x295]
    return "".join(chars[:0x3000] + rng.sample(chars[0x3000:], 4000))


def test_character_sets_as_oniguruma():
    """Oniguruma's \\w (with six Latin-1 numbers outside a class), \\d, \\s, \\h, POSIX brackets and properties,
    character by character: the Rust library's matches on a sample of assigned code points."""
    tokenizers = pytest.importorskip("tokenizers")
    text = sample_code_points()
    for source in SETS:
        kept = tokenizers.pre_tokenizers.Split(tokenizers.Regex(source), "removed").pre_tokenize_str(text)
        rust = set(text) - {c for word, _ in kept for c in word}
        ours = {text[start] for start, _ in Pattern(source, False, "test").spans(text)}
        assert ours == rust, (source, sorted(ours - rust)[:5], sorted(rust - ours)[:5])


def fixture_patterns() -> list[tuple[str, str, dict]]:
    """(file, field, pattern) of every Split and Replace in the tokenizer.json files under tests/fixtures, and the
    whitespace Split tests/test_tokenizer_cuts.py builds."""
    found = [("test_tokenizer_cuts.py", "pre_tokenizer", {"Regex": "\\s+"})]

    def walk(value, file: str, field: str) -> None:
        if isinstance(value, dict):
            if value.get("type") in ("Split", "Replace") and isinstance(value.get("pattern"), dict):
                found.append((file, field, value["pattern"]))
            for key, item in value.items():
                walk(item, file, f"{field}.{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, file, f"{field}[{i}]")

    for path in sorted(FIXTURES.rglob("*.json")):
        text = path.read_text(encoding="utf-8")
        if '"Split"' in text or '"Replace"' in text:
            walk(json.loads(text), str(path.relative_to(FIXTURES)), "")
    return found


def test_every_fixture_pattern_as_the_rust_library():
    """Every pattern of the tokenizer.json files the tests read (XLM-R's and BGE-M3's Replace " {2,}", ...), on
    the corpus and generated lines (with runs of spaces and newlines), through each behavior and a Replace."""
    tokenizers = pytest.importorskip("tokenizers")
    found = fixture_patterns()
    assert {p.get("Regex") for _, _, p in found} >= {" {2,}", "\\s+"}
    texts = CORPUS + generated_lines(40, seed=5) + ["a  b\n\n  c   ", "  ", "\n", ""]
    for file, field, spec in found:
        literal = "String" in spec
        source = spec["String"] if literal else spec["Regex"]
        for text in texts:
            ours, rust = our_outputs(source, text, literal), rust_outputs(tokenizers, source, text, literal)
            assert ours == rust, (file, field, text)


@pytest.mark.parametrize(
    "source, named",
    [
        ("(?~abc)", "absent groups"),
        ("a{2}?", "optional repeat"),
        ("a{1,2}+", "repeat of a repeat"),
        (r"\y", "text segment"),
        ("(?W)a", "ASCII-only"),
        ("[[:alphabet:]]", "POSIX bracket"),
        ("(a", "unclosed"),
    ],
)
def test_what_numbert_cannot_read_as_oniguruma_is_refused_naming_file_and_field(tmp_path, source, named):
    spec = json.loads((FIXTURES / "unigram.json").read_text(encoding="utf-8"))
    spec["pre_tokenizer"]["pretokenizers"].insert(
        0, {"type": "Split", "pattern": {"Regex": source}, "behavior": "Isolated", "invert": False}
    )
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"tokenizer\.json: pre_tokenizer\.pretokenizers\[0\]\.pattern .*{named}"):
        Tokenizer.from_tokenizer_json(path)


def test_any_pattern_compiles_or_is_refused_by_name_in_bounded_time():
    """Random strings of the dialect's pieces: each is compiled or refused with an Unreadable (a ValueError naming
    the construct), never another error or a loop."""
    rng = random.Random(2)
    pieces = [*"()[]{}^$|\\?*+.-:'<>=!#&~,", "a", "1", "\\x{", "(?", "[:", ":]", "\\p{", "\\k<", "(?'", "}", "\\"]
    with bounded(20, 100e6):
        for _ in range(3000):
            source = "".join(rng.choices(pieces, k=rng.randrange(1, 12)))
            try:
                Pattern(source, False, "test")
            except patterns.Unreadable:
                pass


def test_translation_spells_oniguruma_in_the_regex_packages_syntax():
    """A few translations, as the module's docstring tells them."""
    assert translate("^a$") == r"(?:\A|(?<=\n)(?!\z))a(?=\n|\z)"
    assert translate("ab(?i)c|d") == "ab(?i:c|d)"
    assert translate("(?m).") == "(?s:.)"
    assert translate(r"[\h[:digit:]]") == "[0-9a-fA-F[" + patterns.as_oniguruma(r"\p{Nd}") + "]]"
    assert translate(r"\p{Cn}") == r"[\p{Cn}" + patterns.NEWER + "]"  # what Oniguruma's Unicode 16 leaves unassigned
    assert translate(r"\x{41 42}") == r"\U00000041\U00000042"


# --- the bound -----------------------------------------------------------------------------------------------

CATASTROPHIC = "(a|a)+b"  # backtracks exponentially in the regex package and in Oniguruma
HOSTILE_TEXT = "a" * 40 + "c"  # 41 characters


def test_a_catastrophic_pattern_ends_in_a_clear_error_within_its_bound(monkeypatch):
    monkeypatch.setattr(patterns, "MATCH_SECONDS", 0.2)
    pattern = Pattern(CATASTROPHIC, False, "hub/tokenizer.json: pre_tokenizer.pattern")
    start = time.thread_time()
    with bounded(10, 50e6), pytest.raises(PatternTimeout) as error:
        pattern.spans(HOSTILE_TEXT)
    spent = time.thread_time() - start
    message = str(error.value)
    assert "\n" not in message and message.startswith("hub/tokenizer.json: pre_tokenizer.pattern: ")
    assert repr(CATASTROPHIC) in message and "41 characters" in message
    assert spent < 2, spent  # the bound is CPU time: 0.2 s (plus the last search's check), not the whole search


def test_a_callers_deadline_ends_the_searches_as_a_timeout_not_the_texts_fault():
    """Past a caller's deadline (the server's --request-timeout) the searches end in a DeadlinePassed, a
    TimeoutError (the server's 504), not a PatternTimeout (its 422: the text is not at fault), however far the
    text is from its own bound."""
    pattern = Pattern(CATASTROPHIC, False, "hub/tokenizer.json: pre_tokenizer.pattern")
    start = time.monotonic()
    with bounded(10, 50e6), patterns.deadline(start + 0.2), pytest.raises(DeadlinePassed) as error:
        pattern.spans(HOSTILE_TEXT)
    assert isinstance(error.value, TimeoutError) and not isinstance(error.value, PatternTimeout)
    assert "before its caller's deadline" in str(error.value)
    assert time.monotonic() - start < 2
    with patterns.deadline(time.monotonic() + 60):  # a deadline far off: a text the pattern reads is read
        assert pattern.spans("a" * 8 + "b") == [(0, 9)]


def test_the_issues_pattern_is_answered_where_oniguruma_gives_up():
    """(a+)+b, the issue's reproduction, does not backtrack in the regex package: numbert answers (no match) where
    Oniguruma stops at its retry limit from 24 characters on (a panic in the Python binding)."""
    with bounded(10, 50e6):
        assert Pattern("(a+)+b", False, "test").spans("a" * 40 + "c") == []
    tokenizers = pytest.importorskip("tokenizers")
    with pytest.raises(BaseException, match="retry-limit-in-match"):
        tokenizers.pre_tokenizers.Split(tokenizers.Regex("(a+)+b"), "isolated").pre_tokenize_str("a" * 40 + "c")


def hostile_model(directory: Path, pattern: str) -> Path:
    """A tiny RoBERTa (the committed family fixture's weights) whose tokenizer.json splits by `pattern` before
    whitespace: a BPE vocabulary of the special tokens, lowercase letters, digits, "." and ","."""
    shutil.copytree(FIXTURES / "family" / "roberta-ForMaskedLM", directory, ignore=shutil.ignore_patterns("*.npz"))
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    vocab = {t: i for i, t in enumerate([*specials, *string.ascii_lowercase, *string.digits, ".", ","])}
    added = [{"id": i, "content": t, "special": True, "normalized": False} for i, t in enumerate(specials)]
    split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
    spec = {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, {"type": "WhitespaceSplit"}]},
        "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": True},
        "model": {"type": "BPE", "unk_token": "<unk>", "vocab": vocab, "merges": []},
    }
    (directory / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    return directory


def test_api_and_command_line_end_in_one_line_errors(tmp_path):
    directory = hostile_model(tmp_path / "hostile", CATASTROPHIC)
    model = numbert.load(directory)
    assert model.embed(["hello world, 12."]).shape == (1, 32)
    with bounded(20, 50e6), pytest.raises(PatternTimeout, match=r"tokenizer\.json: pre_tokenizer\.pretokenizers\[0\]"):
        model.embed([HOSTILE_TEXT])
    done = run_limited("tokenize", "--model", directory, stdin=(HOSTILE_TEXT + "\n").encode(), seconds=30)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1, done.stderr
    assert lines[0].startswith("numbert tokenize: error: ") and "did not finish matching" in lines[0]


def cpu_seconds(pid: int) -> float:
    """The user and system CPU time a process has used (Linux's /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_served_a_catastrophic_pattern_holds_no_other_request(tmp_path):
    """One model's tokenizer.json carries the catastrophic pattern, another model's a plain one. A 41-character
    request to the first answers 422 (its pattern's bound, 1 s of CPU) or 504 (--request-timeout, 3 s, on a busy
    machine) while /health (polled every 10 ms from a thread) answers in under 100 ms throughout and the other model
    embeds. 120 inputs each well under the bound answer 504 at the deadline, and the server stops matching them
    then (its CPU time stays put). SIGTERM with a hostile request in flight stops the server in time."""
    hostile = hostile_model(tmp_path / "hostile", CATASTROPHIC)
    plain = hostile_model(tmp_path / "plain", "[.,]")
    s = ServerProcess(hostile, "--model", f"plain={plain}", "--request-timeout", "3", "--graceful-timeout", "5")
    latencies: list[float] = []
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=s.url, timeout=5) as client:
            while not done.is_set():
                start = time.perf_counter()
                assert client.get("/health").status_code == 200
                latencies.append(time.perf_counter() - start)
                time.sleep(0.01)

    poller = threading.Thread(target=poll, daemon=True)
    try:
        poller.start()
        with httpx.Client(base_url=s.url, timeout=30) as client:
            slow: dict = {}
            thread = threading.Thread(
                target=lambda: slow.update(answer=client.post("/embed", json={"inputs": HOSTILE_TEXT}))
            )
            started = time.perf_counter()
            thread.start()
            time.sleep(0.2)  # the hostile request is being tokenized
            other = client.post("/models/plain/embed", json={"inputs": "hello world, 12."})
            other_done = time.perf_counter() - started
            thread.join(30)
            slow_done = time.perf_counter() - started
            done.set()
            poller.join(10)
            # 0.1 s of CPU each (a tenth of the bound: the regex package's clock counts the other threads' time too,
            # so a text near the bound may run out of it on a busy machine), 12 s together
            many = client.post("/embed", json={"inputs": ["a" * 18 + "c"] * 120})
            time.sleep(0.5)  # the search running at the deadline ends
            answered_many = cpu_seconds(s.proc.pid)
            time.sleep(1.5)
            after_many = cpu_seconds(s.proc.pid) - answered_many
        answer = slow["answer"]
        assert answer.status_code in (422, 504), answer.text
        said = answer.json()["error"]["message"]
        assert "did not finish matching" in said if answer.status_code == 422 else "--request-timeout" in said
        assert other.status_code == 200 and len(other.json()[0]) == 32
        assert other_done < slow_done, (other_done, slow_done)
        assert many.status_code == 504 and "--request-timeout" in many.json()["error"]["message"], many.text
        assert after_many < 0.2, after_many  # 0.5 to 2 s after the 504, the inputs' matching has stopped
        print(f"/health: {len(latencies)} polls, max {1e3 * max(latencies):.1f} ms; {answer.status_code} after")
        print(f"{slow_done:.2f} s; 0.5 to 2 s after the 504 of 120 inputs, the server used {after_many:.2f} s of CPU")
        assert len(latencies) > 10 and max(latencies) < 0.1, max(latencies)
        # SIGTERM with a hostile request in flight: the server stops within its graceful timeout
        threading.Thread(
            target=lambda: httpx.post(s.url + "/embed", json={"inputs": HOSTILE_TEXT}, timeout=30), daemon=True
        ).start()
        time.sleep(0.3)
        stopping = time.perf_counter()
        assert s.stop(timeout=30) == 0, "".join(s.lines)
        assert time.perf_counter() - stopping < 5 + 2
    finally:
        done.set()
        if s.proc.poll() is None:
            s.proc.kill()


# --- GPT-2's split by classes --------------------------------------------------------------------------------


def test_gpt2_split_by_classes_is_gpt2s_pattern():
    """gpt2_split (ASCII_SPLIT on the characters as their classes) finds gpt2_pattern()'s words, on the corpus,
    generated lines, every code point next to letters, numbers, spaces and apostrophes, and random mixtures."""
    gpt2 = pre_tokenizers.gpt2_pattern()
    rng = random.Random(1)
    texts = CORPUS + generated_lines(60, seed=7)
    every = [chr(c) for c in range(0, sys.maxunicode + 1, 7) if not 0xD800 <= c < 0xE000]
    texts += ["".join(every[i : i + 64]) for i in range(0, len(every), 64)]
    parts = ["a", "é", "1", "٣", " ", "\u3000", "\n", "'s", "'t", "'ll", "!", "\u0301", "\x1c", "ß", "東"]
    texts += ["".join(rng.choices(parts, k=rng.randrange(1, 24))) for _ in range(2000)]
    for text in texts:
        assert pre_tokenizers.gpt2_split(text) == gpt2.findall(text), repr(text)


if __name__ == "__main__":
    write_expected()
