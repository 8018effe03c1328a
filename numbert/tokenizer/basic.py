"""BERT's tokenizer stages, written plainly: text -> words -> WordPiece tokens, with offsets.

As google-research/bert's `BasicTokenizer` + `WordpieceTokenizer`, to the character what
transformers' Rust-backed `BertTokenizer` does (docs/tokenizer.md says where its Python tokenizer
differs):

1. `normalize`: clean (control characters go, whitespace becomes ' '), space out CJK ideographs,
   strip accents (NFD, then drop the combining marks), lowercase; every character of the result
   remembers the original character it came from, which is how offsets stay exact.
2. `pre_tokenize`: split at spaces, and make every punctuation character a word of its own.
3. `wordpiece`: cut each word, greedy longest-match-first, into vocabulary pieces (`##` continues a word).

`tokenize` runs the three on one text. The Tokenizer gives the same tokens faster (fast.py) and
wraps them in [CLS]/[SEP] (tokenizer.py). Characters on which Python's `unicodedata` and the Rust
tables disagree come from unicode_tables.py.
"""

from __future__ import annotations

import functools
import unicodedata

from . import unicode_tables as rust


def is_whitespace(ch: str) -> bool:
    """A space for BERT: tab, newline, carriage return and Unicode White_Space (U+00A0, U+3000, ...).

    Python's isspace() also counts U+001C..U+001F, which are control characters to BERT.

    >>> is_whitespace("\\u3000"), is_whitespace("\\x1c")
    (True, False)
    """
    return ch.isspace() and ch not in "\x1c\x1d\x1e\x1f"


def is_control(ch: str) -> bool:
    """A character BERT deletes: categories Cc, Cf, Co, Cs, except tab, newline and carriage return.

    Unassigned code points (Cn) are kept: the Rust tokenizer keeps them (and they become [UNK]).

    >>> is_control("\\x00"), is_control("\\u200b"), is_control("\\n")
    (True, True, False)
    """
    if ch in "\t\n\r" or ch in rust.NEW_FORMAT_CHARS:
        return False
    return unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs")


@functools.cache
def is_punctuation(ch: str) -> bool:
    """A word of its own: Unicode punctuation (P*) and every printable ASCII character that is not a
    letter or digit, so `$`, `+`, `^` and `` ` `` too.

    >>> [is_punctuation(c) for c in "$«a€"]
    [True, True, False, False]
    """
    if ch.isascii():
        return ch.isprintable() and not ch.isalnum() and ch != " "
    if ch in rust.OLD_PUNCTUATION:
        return True
    return unicodedata.category(ch).startswith("P") and ch not in rust.NEW_PUNCTUATION


def is_chinese_char(ch: str) -> bool:
    """A CJK ideograph (the CJK Unified Ideographs blocks and their compatibility blocks).

    Hangul, Hiragana and Katakana are not: those scripts put spaces between words.

    >>> is_chinese_char("中"), is_chinese_char("한")
    (True, False)
    """
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B81F
        or 0x2B920 <= cp <= 0x2CEAF  # the Rust tables skip 2B820..2B91F
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def is_nonspacing_mark(ch: str) -> bool:
    """A combining mark (category Mn), what accent stripping removes after NFD."""
    if ch in rust.OLD_NONSPACING_MARKS:
        return True
    return unicodedata.category(ch) == "Mn" and ch not in rust.NEW_NONSPACING_MARKS


def clean_char(ch: str, split_chinese: bool = True) -> str:
    """Cleaning: '' for a control character (deleted), ' ' for whitespace, ' 中 ' for a CJK
    ideograph (when `split_chinese`), else the character itself.

    >>> [clean_char(c) for c in "a\\t\\x00中"]
    ['a', ' ', '', ' 中 ']
    """
    if ch == "\ufffd" or is_control(ch):
        return ""
    if is_whitespace(ch):
        return " "
    return f" {ch} " if split_chinese and is_chinese_char(ch) else ch


def decompose(ch: str) -> str:
    """The canonical decomposition (NFD) of one character: 'é' -> 'e' + U+0301."""
    return ch if ch in rust.NEW_DECOMPOSITIONS else unicodedata.normalize("NFD", ch)


def combining_class(ch: str) -> int:
    """The canonical combining class NFD sorts combining marks by (0 for a base character), from
    the Rust tables: marks newer than them are class 0 there, so NFD leaves them where they are.

    >>> combining_class("a"), combining_class("\\u0301"), combining_class("\\u1acc")
    (0, 230, 0)
    """
    return 0 if ch in rust.NEW_COMBINING_MARKS else unicodedata.combining(ch)


def canonical_order(chars: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """NFD's canonical reordering of (character, payload) pairs: every run of combining marks
    (combining class > 0) sorted, stably, by combining class."""

    def by_class(item: tuple[str, bool]) -> int:
        return combining_class(item[0])

    out, run = [], []
    for item in chars:
        if by_class(item):
            run.append(item)
        else:
            out += sorted(run, key=by_class) + [item]
            run = []
    return out + sorted(run, key=by_class)


def strip_accents(chars: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """NFD, then drop the combining marks, on (character, origin) pairs: 'É' -> 'E'.

    The Rust normalizer hands out origins by position: after canonical reordering, the k-th
    character that opens a decomposition takes the k-th origin, so a moved mark takes the origin
    of the character that stood in its place; the rest of a decomposition shares its origin.
    """
    decomposed = canonical_order([(d, j > 0) for c, _ in chars for j, d in enumerate(decompose(c))])
    out, k = [], -1
    for ch, inserted in decomposed:
        k += not inserted
        if not is_nonspacing_mark(ch):
            out.append((ch, chars[k][1]))
    return out


def lowercase(text: str) -> str:
    """Lowercase character by character, as Rust does: no final-sigma rule, so 'Σ' is always 'σ'.

    >>> lowercase("ΟΔΟΣ")
    'οδοσ'
    """
    return "".join(rust.NEW_LOWERCASE.get(c) or c.lower() for c in text)


def normalize(
    text: str, *, lower: bool = True, strip: bool = True, split_chinese: bool = True
) -> tuple[str, list[int]]:
    """Stage 1, BERT's normalizer: the normalized text, and for each of its characters the index of
    the original character it came from. The steps run in the Rust order: clean, space out CJK,
    strip accents, lowercase.

    >>> normalize("Héllo\\x00 中")
    ('hello  中 ', [0, 1, 2, 3, 4, 6, 7, 7, 7])
    >>> normalize("İ", strip=False)  # 'İ' lowercases to two characters, both from 'İ'
    ('i̇', [0, 0])
    """
    chars = [(c, i) for i, ch in enumerate(text) for c in clean_char(ch, split_chinese)]
    if strip:
        chars = strip_accents(chars)
    if lower:
        chars = [(c, i) for ch, i in chars for c in lowercase(ch)]
    return "".join(c for c, _ in chars), [i for _, i in chars]


def normalize_char(ch: str, *, lower: bool = True, strip: bool = True, split_chinese: bool = True) -> str:
    """What `normalize` turns one character into: '' (deleted), ' ' (a space), or characters.

    >>> normalize_char("É"), normalize_char("\\u200b"), normalize_char("\\u3000")
    ('e', '', ' ')
    """
    return normalize(ch, lower=lower, strip=strip, split_chinese=split_chinese)[0]


def pre_tokenize(text: str) -> list[tuple[int, int]]:
    """Stage 2: split normalized text into words, at spaces and around every punctuation character.

    Returns (start, end) spans.

    >>> text = "don't stop"
    >>> [text[start:end] for start, end in pre_tokenize(text)]
    ['don', "'", 't', 'stop']
    """
    spans, start = [], None
    for i, ch in enumerate(text):
        if ch == " " or is_punctuation(ch):
            if start is not None:
                spans.append((start, i))
                start = None
            if ch != " ":
                spans.append((i, i + 1))
        elif start is None:
            start = i
    if start is not None:
        spans.append((start, len(text)))
    return spans


def wordpiece(
    word: str,
    vocab: dict[str, int] | set[str],
    *,
    unk_token: str = "[UNK]",
    max_input_chars_per_word: int = 100,
    longest_piece: int | None = None,
) -> list[tuple[str, int, int]]:
    """Stage 3: split one word into vocabulary pieces, greedy longest-match-first: [(piece, start, end)].

    A word that cannot be split, or is longer than `max_input_chars_per_word` characters, is one
    `[UNK]`. `longest_piece` (the length of the longest vocabulary entry) only saves trying
    substrings that cannot be in the vocabulary.

    >>> wordpiece("unaffable", {"un", "##aff", "##able", "##a"})
    [('un', 0, 2), ('##aff', 2, 5), ('##able', 5, 9)]
    >>> wordpiece("unaffablex", {"un", "##aff", "##able"})
    [('[UNK]', 0, 10)]
    """
    if len(word) > max_input_chars_per_word:
        return [(unk_token, 0, len(word))]
    pieces, start = [], 0
    while start < len(word):
        end = len(word) if longest_piece is None else min(len(word), start + longest_piece)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        else:
            return [(unk_token, 0, len(word))]
        pieces.append((piece, start, end))
        start = end
    return pieces


def tokenize(
    text: str,
    vocab: dict[str, int] | set[str],
    *,
    lower: bool = True,
    strip: bool = True,
    split_chinese: bool = True,
    unk_token: str = "[UNK]",
    max_input_chars_per_word: int = 100,
) -> list[tuple[str, tuple[int, int], int]]:
    """The three stages on one text: [(piece, its span in `text`, its word's index)].

    >>> tokenize("Unaffable, ok", {"un", "##aff", "##able", ",", "ok"})
    [('un', (0, 2), 0), ('##aff', (2, 5), 0), ('##able', (5, 9), 0), (',', (9, 10), 1), ('ok', (11, 13), 2)]
    """
    normalized, origin = normalize(text, lower=lower, strip=strip, split_chinese=split_chinese)
    tokens = []
    for word, (start, end) in enumerate(pre_tokenize(normalized)):
        for piece, s, e in wordpiece(
            normalized[start:end], vocab, unk_token=unk_token, max_input_chars_per_word=max_input_chars_per_word
        ):
            tokens.append((piece, (origin[start + s], origin[start + e - 1] + 1), word))
    return tokens
