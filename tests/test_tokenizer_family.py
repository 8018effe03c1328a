"""BERT's relatives' tokenizers (a tokenizer.json's stages, read by numbert/tokenizer/tokenizer_json.py):
byte-level BPE (RoBERTa), Unigram, and XLM-RoBERTa's SentencePiece Unigram with its Precompiled charsmap, token
for token the Rust `tokenizers` library's: ids, tokens, offsets, word ids, type ids, pairs, truncation windows
and decode.

The three tokenizer.json files are trained here (scripts/make_family_tokenizers.py) and committed in
tests/fixtures, with what the Rust library gives on a sample of cases (family_expected.json), checked
without it. The texts include code points unassigned in Python's Unicode tables: the Rust crate's newer
letters and numbers are data (unicode_tables.NEWER_LETTERS, NEWER_NUMBERS).
"""

from __future__ import annotations

import itertools
import json
import os
import random
from pathlib import Path

import pytest
from helpers import fixture_tokenizers, rust_fixture_tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tokenizer_limits import peak_bytes
from test_tokenizer_parity import CORPUS, as_dict, generated_lines

from numbert.tokenizer import Tokenizer, pipeline_fast, pre_tokenizers
from numbert.tokenizer import stages as nt_stages
from numbert.tokenizer.bpe import BPE
from numbert.tokenizer.memo import Memo
from numbert.tokenizer.models import WordPiece
from numbert.tokenizer.normalizers import Unchanged

FIXTURES = Path(__file__).parent / "fixtures"
NAMES = ("roberta_bpe", "unigram", "xlmr_spm")
EXPECTED = FIXTURES / "family_expected.json"
FIELDS = ("ids", "type_ids", "offsets", "word_ids")  # committed (tokens: checked live only, to keep it small)


LINES = CORPUS + generated_lines(60, seed=3)


@pytest.fixture(scope="module")
def ours() -> dict[str, Tokenizer]:
    return fixture_tokenizers(NAMES)


@pytest.fixture(scope="module")
def rust() -> dict:
    return rust_fixture_tokenizers(NAMES)


def rust_windows(tok, text: str, pair: str | None = None, add_special_tokens: bool = True, **truncation) -> list:
    """The Rust encoding and its overflowing windows (truncation: max_length, strategy, stride)."""
    tok.no_truncation()
    if truncation.get("max_length"):
        tok.enable_truncation(truncation["max_length"], strategy=truncation["strategy"], stride=truncation["stride"])
    enc = tok.encode(text, pair, add_special_tokens=add_special_tokens)
    return [{k: v for k, v in as_dict(e).items()} for e in [enc, *enc.overflowing]]


def our_windows(tok, text: str, pair: str | None = None, add_special_tokens: bool = True, **truncation) -> list:
    max_length = truncation.get("max_length")
    enc = tok.encode(
        text,
        pair,
        add_special_tokens=add_special_tokens,
        max_length=max_length,
        truncation=truncation["strategy"] if max_length else False,
        stride=truncation.get("stride", 0),
        return_overflowing_tokens=True,
    )
    return [as_dict(e) for e in [enc, *enc.overflowing]]


# --- live parity -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_corpus(ours, rust, name):
    """Every line of the project's corpus (several scripts) and its random mixtures, and their decoding."""
    for line in LINES:
        assert our_windows(ours[name], line) == rust_windows(rust[name], line), line
        ids = rust[name].encode(line).ids
        for skip in (True, False):
            assert ours[name].decode(ids, skip_special_tokens=skip) == rust[name].decode(ids, skip), line


@pytest.mark.parametrize("name", NAMES)
def test_pairs_and_truncation(ours, rust, name):
    """Pairs, truncation strategies, strides, overflowing windows and no special tokens, on random cases."""
    rng = random.Random(name)
    for _ in range(60):
        case = {
            "text": rng.choice(LINES),
            "pair": rng.choice([None, *filter(None, LINES)]),
            "add_special_tokens": rng.random() < 0.8,
            "max_length": rng.choice([None, 10, 16, 40]),
            "strategy": rng.choice(["longest_first", "only_first", "only_second"]),
            "stride": rng.choice([0, 0, 2]),
        }
        try:
            expected = rust_windows(rust[name], **case)
        except BaseException:  # noqa: B036 - Rust refuses (a strategy that cannot fit) with an exception or a panic
            with pytest.raises(ValueError):
                our_windows(ours[name], **case)
            continue
        assert our_windows(ours[name], **case) == expected, case


@pytest.mark.parametrize("name", ["roberta_bpe", "xlmr_spm"])
def test_the_fast_path_is_the_stages(ours, name):
    """pipeline_fast.py (GPT-2's split, or a normalizer and Metaspace; each word's tokens memoized) gives
    what the stages give, memos empty and filled."""
    stages = Tokenizer.from_tokenizer_json(FIXTURES / f"{name}.json", fast=False)
    fresh = Tokenizer.from_tokenizer_json(FIXTURES / f"{name}.json")
    assert ours[name].words is not fresh.words and type(ours[name].words) is not type(stages.words)
    odd = ["a\ud800b", "  x  ", "", " ", "x", "▁a ▁▁b", " lead", "two  spaces", "tail ", "é ü"]
    for line in LINES + odd:
        expected = our_windows(stages, line)
        assert our_windows(fresh, line) == expected, line
        assert our_windows(ours[name], line) == expected, line
        assert our_windows(ours[name], line, "pair " + line) == our_windows(stages, line, "pair " + line), line


@pytest.mark.parametrize("contiguous", [True, False])
def test_join_words_places_each_token_at_its_words_start(contiguous):
    """pipeline_fast.join_words: a token's offsets are its word's start plus its place in the word, word ids
    count the words, whether the words are contiguous and each word's tokens tile it (the running sum of
    lengths) or not (an "é" cut into two tokens of one span, as byte-level BPE cuts a character's bytes)."""

    def pieces(word: str) -> list[tuple[int, str, int, int]]:  # two characters a token; "é" as two tokens
        out = []
        for i in range(0, len(word), 2):
            if word[i] == "é":
                out += [
                    (1, "é1", i, i + 1),
                    (2, "é2", i, i + 1),
                    *([(3, word[i + 1], i + 1, i + 2)] if word[i + 1 :] else []),
                ]
            else:
                out.append((0, word[i : i + 2], i, min(i + 2, len(word))))
        return out

    memo = Memo(lambda word: pipeline_fast.word_tokens(pieces(word), len(word)))
    for words in (["ab", "cde", " f"], ["ab", "éx", "yz"], ["é"], []):
        starts = (
            list(itertools.accumulate(map(len, words), initial=7))
            if contiguous
            else [3 + 10 * w for w in range(len(words) + 1)]
        )
        segment = pipeline_fast.join_words(words, starts, memo, contiguous)
        expected = [(w, (starts[w] + s, starts[w] + e)) for w, word in enumerate(words) for _, _, s, e in pieces(word)]
        assert list(zip(segment.words, segment.offsets)) == expected, words
        assert segment.tokens == [t for word in words for _, t, _, _ in pieces(word)]


def test_unchanged_spans_are_the_list_they_stand_for():
    """normalizers.Unchanged (the spans of a text no normalizer changed, made when read) indexes, slices and
    iterates as the list of (start + i, start + i + 1)."""
    for start, size in ((0, 0), (0, 1), (5, 7)):
        spans, listed = Unchanged(start, size), [(start + i, start + i + 1) for i in range(size)]
        assert list(spans) == listed and len(spans) == size
        assert [spans[i] for i in range(-size, size)] == [listed[i] for i in range(-size, size)]
        for cut in (slice(None), slice(2, None), slice(1, -1), slice(None, None, 2), slice(-3, 100), slice(4, 1, -1)):
            assert spans[cut] == listed[cut], cut
        for i in (size, -size - 1):
            with pytest.raises(IndexError):
                spans[i]


def test_bpe_merges_as_the_plain_rule():
    """BPE.merge_word (a heap over a linked list) merges as the rule it implements: while some adjacent pair is
    in the merges, merge the leftmost occurrence of the lowest-ranked one; on random words over a small
    alphabet, with merges whose later pairs may rank below the pairs they are built from."""
    rng = random.Random(0)
    symbols = list("abcd")
    merges: list[tuple[str, str]] = []
    while len(merges) < 40:
        left, right = rng.choice(symbols), rng.choice(symbols)
        if (left, right) not in merges and len(left + right) <= 4:
            merges.insert(rng.randrange(len(merges) + 1), (left, right))  # any rank, not the order of creation
            symbols.append(left + right)
    bpe = BPE({s: i for i, s in enumerate(dict.fromkeys(symbols))}, merges)
    rank = {pair: r for r, pair in reversed(list(enumerate(merges)))}

    def plain(word: str) -> list[str]:
        pieces = list(word)
        while pairs := [(rank[p], i) for i, p in enumerate(zip(pieces, pieces[1:])) if p in rank]:
            _, i = min(pairs)
            pieces[i : i + 2] = [pieces[i] + pieces[i + 1]]
        return pieces

    for word in ("".join(rng.choices("abcd", k=rng.randrange(1, 25))) for _ in range(3000)):
        merged = bpe.merge_word(bpe.symbols(word))
        assert [s for s, _, _ in merged] == plain(word), word
        assert [(start, end) for _, start, end in merged] == list(
            itertools.pairwise(itertools.accumulate(map(len, plain(word)), initial=0))
        ), word


def test_the_ascii_split_is_gpt2s_split_on_ascii():
    """pre_tokenizers.ASCII_SPLIT finds GPT-2's words in ASCII text: every pair of ASCII characters, and
    random mixtures of them with contractions and runs of spaces."""
    gpt2 = pre_tokenizers.gpt2_pattern()
    texts = [a + b for a in map(chr, range(128)) for b in map(chr, range(128))]
    rng = random.Random(0)
    parts = [*map(chr, range(128)), "  ", " \t ", "'s", "'ll", "'re", "ab", "12"]
    texts += ["".join(rng.choices(parts, k=rng.randrange(1, 16))) for _ in range(3000)]
    for text in texts:
        assert pre_tokenizers.ASCII_SPLIT.findall(text) == gpt2.findall(text), repr(text)


def test_the_metaspace_fast_path_prepends_as_the_stages(tmp_path):
    """Metaspace's prepend schemes ("first": only at the text's start, so not after an added token), with
    and without a normalizer, fast against the stages."""
    spec = json.loads((FIXTURES / "xlmr_spm.json").read_text(encoding="utf-8"))
    lines = ["<s>x y", "a<s>b", "<s> b", "a </s>  c", "▁x", "", " ", "é", "a\u0301 b", *LINES[:20]]
    path = tmp_path / "tokenizer.json"
    for scheme, normalizer in itertools.product(("first", "always", "never"), (spec["normalizer"], None)):
        spec.update(normalizer=normalizer)
        spec["pre_tokenizer"].update(prepend_scheme=scheme)
        path.write_text(json.dumps(spec), encoding="utf-8")
        fast, stages = Tokenizer.from_tokenizer_json(path), Tokenizer.from_tokenizer_json(path, fast=False)
        for line in lines:
            assert our_windows(fast, line) == our_windows(stages, line), (scheme, line)


FUZZ = settings(
    max_examples=int(os.environ.get("NUMBERT_TOKENIZER_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
fuzz_text = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.one_of(
            st.sampled_from(list(" \t\n\r\x00\x0b\x85\xa0\u3000\u200b\u200d\u00ad\ufeff\u0301\u0308éÅﬁ①½日本한"))
            | st.sampled_from(["<s>", "</s>", "<mask>", "[CLS]", " <pad> ", "\r\n", "e\u0301", "ab", "The"]),
            st.characters(codec="utf-8"),
        ),
        max_size=30,
    ).map("".join),
)


@FUZZ
@given(text=fuzz_text)
def test_fuzzed_text(ours, rust, text):
    for name in NAMES:
        assert our_windows(ours[name], text) == rust_windows(rust[name], text), (name, text)


def test_lstrip_added_token_and_prefix_space(rust, tmp_path):
    """RoBERTa's real settings: <mask> takes the whitespace on its left (lstrip), add_prefix_space."""
    spec = json.loads((FIXTURES / "roberta_bpe.json").read_text(encoding="utf-8"))
    for token in spec["added_tokens"]:
        token["lstrip"] = token["content"] == "<mask>"
        token["rstrip"] = token["content"] == "</s>"
    spec["pre_tokenizer"]["add_prefix_space"] = True
    spec["post_processor"]["add_prefix_space"] = True
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    mine, theirs = Tokenizer.from_tokenizer_json(path), type(rust["roberta_bpe"]).from_file(str(path))
    for text in ["The capital of France is <mask>.", "a  <mask> b</s>  c", "<mask>", " x", "   ", *LINES[:20]]:
        assert our_windows(mine, text) == rust_windows(theirs, text), text
        for case in ({"max_length": 8, "strategy": "longest_first", "stride": 1},):
            assert our_windows(mine, text, "pair <mask>", **case) == rust_windows(theirs, text, "pair <mask>", **case)


# --- the committed expected outputs (no tokenizers needed) ---------------------------------------------------


def fixture_cases() -> list[dict]:
    cases = [{"name": name, "text": text} for name in NAMES for text in CORPUS[::4]]
    long_text = " ".join(CORPUS[:3])
    cases += [
        {"name": name, "text": long_text, "pair": CORPUS[0], "max_length": 32, "strategy": s, "stride": 2}
        for name in NAMES
        for s in ("longest_first", "only_first")
    ]
    return cases


def write_expected() -> None:
    """family_expected.json from the Rust library (scripts/make_family_tokenizers.py calls this)."""
    import tokenizers

    cases = fixture_cases()
    for case in cases:
        tok = tokenizers.Tokenizer.from_file(str(FIXTURES / f"{case['name']}.json"))
        options = {k: case[k] for k in ("pair", "max_length", "strategy", "stride") if k in case}
        case["expected"] = [{k: w[k] for k in FIELDS} for w in rust_windows(tok, case["text"], **options)]
    EXPECTED.write_text(
        "[\n" + ",\n".join(json.dumps(c, ensure_ascii=True, separators=(",", ":")) for c in cases) + "\n]\n",
        encoding="utf-8",
    )


def test_committed_expected_outputs(ours):
    for case in json.loads(EXPECTED.read_text(encoding="utf-8")):
        options = {k: case[k] for k in ("pair", "max_length", "strategy", "stride") if k in case}
        got = [{k: w[k] for k in FIELDS} for w in our_windows(ours[case["name"]], case["text"], **options)]
        expected = [{**w, "offsets": [tuple(o) for o in w["offsets"]]} for w in case["expected"]]
        assert got == expected, case["text"]


def test_batch_call_and_padding(ours):
    tok = ours["xlmr_spm"]
    batch = tok.encode_batch(["hello world", "a"], ["x", "a longer second text"])
    assert batch.input_ids.shape == (2, max(len(e) for e in batch.encodings))
    assert batch.input_ids[1, -1] == tok.pad_token_id or len(batch.encodings[1]) == batch.input_ids.shape[1]
    call = tok(["hello world", "a"], padding=True, return_tensors="np")
    assert (call["input_ids"][0][: len(tok.encode("hello world"))] == tok.encode("hello world").ids).all()


# --- loading and refusals ----------------------------------------------------------------------------------


def edited(tmp_path: Path, name: str, edit) -> Path:
    spec = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    edit(spec)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "edit", "message"),
    [
        ("roberta_bpe", lambda s: s["model"].update(type="WordLevelX"), r'model.type is "WordLevelX".*BPE, Unigram'),
        ("unigram", lambda s: s.update(normalizer={"type": "BertNormalizer"}), r"normalizer.type.*NFKC"),
        (
            "unigram",
            lambda s: s["pre_tokenizer"]["pretokenizers"].append({"type": "Punctuation"}),
            r'pretokenizers\[3\].type is "Punctuation".*Metaspace',
        ),
        ("xlmr_spm", lambda s: s.update(post_processor={"type": "Gpt2"}), r'post_processor.type is "Gpt2".*Roberta'),
        ("xlmr_spm", lambda s: s.update(decoder={"type": "CTC"}), r'decoder.type is "CTC"'),
        ("roberta_bpe", lambda s: s["model"]["merges"].insert(7, ["Ġ", "zzz"]), r"merges\[7\].*'zzz', not in"),
        ("unigram", lambda s: s["model"]["vocab"].__setitem__(5, ["x"]), r"model.vocab\[5\] must be \[piece, score\]"),
        ("unigram", lambda s: s["model"].update(unk_id=10**6), r"model.unk_id 1000000"),
        ("roberta_bpe", lambda s: s["added_tokens"][4].update(normalized=True), r"added_tokens\[4\].*<mask>"),
        ("roberta_bpe", lambda s: s["model"].update(continuing_subword_prefix="##"), r"model.continuing_subword"),
    ],
)
def test_unsupported_components_are_refused_by_name(tmp_path, name, edit, message):
    path = edited(tmp_path, name, edit)
    with pytest.raises(ValueError, match=message) as error:
        Tokenizer.from_tokenizer_json(path)
    assert str(path) in str(error.value)


def test_an_empty_subword_prefix_and_suffix_are_none(ours, tmp_path):
    """transformers saves a BPE model with continuing_subword_prefix and end_of_word_suffix "" (roberta-base's
    tokenizer.json has them so): the same tokenizer as without them; a non-empty one is refused by name."""
    empty = edited(
        tmp_path, "roberta_bpe", lambda s: s["model"].update(continuing_subword_prefix="", end_of_word_suffix="")
    )
    tok = Tokenizer.from_tokenizer_json(empty)
    assert [tok.encode(t).ids for t in LINES[:20]] == [ours["roberta_bpe"].encode(t).ids for t in LINES[:20]]
    with pytest.raises(ValueError, match='model.continuing_subword_prefix is "##"'):
        Tokenizer.from_tokenizer_json(
            edited(tmp_path, "roberta_bpe", lambda s: s["model"].update(continuing_subword_prefix="##"))
        )


def test_from_pretrained_picks_the_model_type(ours, tmp_path):
    for name in NAMES:
        directory = tmp_path / name
        directory.mkdir()
        (directory / "tokenizer.json").write_bytes((FIXTURES / f"{name}.json").read_bytes())
        (directory / "tokenizer_config.json").write_text('{"model_max_length": 512}', encoding="utf-8")
        tok = Tokenizer.from_pretrained(directory)
        assert not isinstance(tok.model, WordPiece) and tok.model_max_length == 512
        assert tok.encode("Hello there").ids == ours[name].encode("Hello there").ids


@pytest.mark.parametrize("files", [("vocab.json", "merges.txt"), ("sentencepiece.bpe.model",)])
def test_slow_tokenizer_files_alone_are_refused(tmp_path, files):
    for f in files:
        (tmp_path / f).write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="tokenizer.json"):
        Tokenizer.from_pretrained(tmp_path)


# --- hostile text ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_long_line_is_read_from_a_prefix_when_truncated(ours, name):
    """A 20 MB line truncated to 64 tokens is tokenized from a prefix: the same first tokens, little memory."""
    line = "The quick brown fox, café \x00 日本 " * 700_000
    peak, enc = peak_bytes(lambda: ours[name].encode(line, max_length=64, truncation=True))
    assert enc.ids == ours[name].encode(line[:2000], max_length=64, truncation=True).ids
    assert peak < 5_000_000


@pytest.mark.parametrize("name", NAMES)
def test_too_long_lines_are_refused_not_swallowed(ours, name, monkeypatch):
    monkeypatch.setattr(nt_stages, "MAX_INPUT_CHARS", 10_000)
    with pytest.raises(ValueError, match="at most 10000"):
        ours[name].encode("word " * 3000)  # untruncated
    with pytest.raises(ValueError, match="at most 10000"):
        ours[name].encode("\x00" * 20_000, max_length=8, truncation=True)  # one 'word': no prefix to cut
    assert len(ours[name].encode("word " * 3000, max_length=8, truncation=True)) == 8


@pytest.mark.parametrize("name", NAMES)
def test_lone_surrogates_and_control_characters(ours, name):
    enc = ours[name].encode("a\ud800b \udfff\x00\x1b[0m \x7f")
    assert len(enc.ids) == len(enc.offsets) and all(0 <= s <= e <= 14 for s, e in enc.offsets)


def test_wordpiece_in_mpnets_frame(rust, minilm_dir, tmp_path):
    """MPNet's tokenizer: BERT's WordPiece stages in RoBERTa's frame <s> A </s></s> B </s> (type ids all 0)."""
    spec = json.loads((minilm_dir / "tokenizer.json").read_text(encoding="utf-8"))
    spec["post_processor"] = {
        "type": "RobertaProcessing",
        "sep": ["[SEP]", 102],
        "cls": ["[CLS]", 101],
        "trim_offsets": True,
        "add_prefix_space": True,
    }
    spec["padding"] = spec["truncation"] = None  # the Rust tokenizer's own, which numbert's calls take as arguments
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    mine, theirs = Tokenizer.from_tokenizer_json(path), type(rust["roberta_bpe"]).from_file(str(path))
    assert mine.post_processor is not None and mine.num_special_tokens(True) == 4
    rng = random.Random(0)
    for text in LINES[:30]:
        pair = rng.choice(LINES[:30]) or None
        assert our_windows(mine, text, pair) == rust_windows(theirs, text, pair), text
        case = {"max_length": 20, "strategy": "longest_first", "stride": 1}
        assert our_windows(mine, text, pair, **case) == rust_windows(theirs, text, pair, **case), text


def test_lowercase_is_rusts_on_the_pairs_pythons_tables_lack():
    from numbert.tokenizer.normalizers import lower
    from numbert.tokenizer.unicode_tables import NEW_LOWERCASE

    rust_lowercase = pytest.importorskip("tokenizers").normalizers.Lowercase()
    for c in [*NEW_LOWERCASE, "A", "Σ", "ẞ", "\ua7da"]:
        assert lower(c) == rust_lowercase.normalize_str(c), hex(ord(c))
