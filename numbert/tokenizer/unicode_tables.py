"""Where the Rust tokenizer's Unicode tables differ from Python's `unicodedata`, as data.

transformers' Rust-backed BertTokenizer (the `tokenizers` crate) takes character categories from
Unicode 8.0 (the `unicode_categories` crate), canonical combining classes (which order NFD's
combining marks) from an older Unicode than Python 3.11's `unicodedata` (14.0), and lowercasing from a
newer one. These are the characters on which the two disagree, found by running both over
every code point (re-checked by tests/test_tokenizer_parity.py::test_every_code_point). Everywhere
else `unicodedata` is right. docs/tokenizer.md says where each table is used.
"""

from __future__ import annotations


def code_points(ranges: str) -> frozenset[str]:
    """The characters of a list of hex code points and ranges: "061D 0898-089F" -> {'\\u061d', '\\u0898', ...}."""
    chars: set[str] = set()
    for item in ranges.split():
        first, _, last = item.partition("-")
        chars.update(map(chr, range(int(first, 16), int(last or first, 16) + 1)))
    return frozenset(chars)


def lowercase_pairs(ranges: str) -> dict[str, str]:
    """{upper: lower} from items "FIRST-LAST>LOWER_OF_FIRST": "10D50-10D65>10D70" maps U+10D50 to U+10D70, ..."""
    table = {}
    for item in ranges.split():
        source, _, target = item.partition(">")
        for offset, ch in enumerate(sorted(code_points(source))):
            table[ch] = chr(int(target, 16) + offset)
    return table


NEW_FORMAT_CHARS = code_points("0890-0891 08E2 110CD 13430-13438")  # Cf since 8.0: kept, not deleted
NEW_PUNCTUATION = code_points(  # P* since 8.0: not punctuation
    "061D 09FD 0A76 0C77 0C84 1B7D-1B7E 2E43-2E4F 2E52-2E5D 10EAD 10F55-10F59 10F86-10F89 1144B-1144F "
    "1145A-1145B 1145D 11660-1166C 116B9 1183B 11944-11946 119E2 11A3F-11A46 11A9A-11A9C 11A9E-11AA2 "
    "11C41-11C45 11C70-11C71 11EF7-11EF8 11FFF 12FF1-12FF2 16E97-16E9A 16FE2 1E95E-1E95F"
)
OLD_PUNCTUATION = code_points("166D 111C9")  # punctuation in 8.0, since reclassified
NEW_NONSPACING_MARKS = code_points(  # Mn since 8.0: accent stripping keeps them
    "07FD 0898-089F 08CA-08E1 09FE 0AFA-0AFF 0B55 0C04 0C3C 0D00 0D3B-0D3C 0D81 0EBA 180F 1885-1886 "
    "1ABF-1ACE 1DF6-1DFB A82C A8C5 A8FF A9BD 10D24-10D27 10EAB-10EAC 10F46-10F50 10F82-10F85 11070 "
    "11073-11074 110C2 111C9 111CF 1123E 1133B 11438-1143F 11442-11444 11446 1145E 1182F-11837 "
    "11839-1183A 1193B-1193C 1193E 11943 119D4-119D7 119DA-119DB 119E0 11A01-11A0A 11A33-11A38 "
    "11A3B-11A3E 11A47 11A51-11A56 11A59-11A5B 11A8A-11A96 11A98-11A99 11C30-11C36 11C38-11C3D 11C3F "
    "11C92-11CA7 11CAA-11CB0 11CB2-11CB3 11CB5-11CB6 11D31-11D36 11D3A 11D3C-11D3D 11D3F-11D45 11D47 "
    "11D90-11D91 11D95 11D97 11EF3-11EF4 16F4F 16FE4 1CF00-1CF2D 1CF30-1CF46 1E000-1E006 1E008-1E018 "
    "1E01B-1E021 1E023-1E024 1E026-1E02A 1E130-1E136 1E2AE 1E2EC-1E2EF 1E944-1E94A"
)
OLD_NONSPACING_MARKS = code_points("1734")  # Mn in 8.0, Mc since: accent stripping drops it
NEW_DECOMPOSITIONS = code_points("11938")  # NFD leaves it whole (and NFC does not compose U+11935 U+11930)
NEW_COMPATIBILITY_DECOMPOSITIONS = code_points(  # NFKD leaves them whole
    "32FF A7F2-A7F4 AB69 10781-10785 10787-107B0 107B2-107BA 11938 1F16C 1FBF0-1FBF9"
)
NEW_COMBINING_MARKS = code_points(  # combining class > 0 since the Rust tables: NFD never reorders them
    "07FD 0898-089F 08CA-08D3 09FE 0C3C 0D3B-0D3C 0EBA 1715 1ABF-1ACE 1DF6-1DFA A82C 10D24-10D27 10EAB-10EAC "
    "10F46-10F50 10F82-10F85 11070 1133B 1145E 11839-1183A 1193D-1193E 11943 119E0 11A34 11A47 11A99 11D42 "
    "11D44-11D45 11D97 16FF0-16FF1 1E130-1E136 1E2AE 1E2EC-1E2EF"
)
NEW_LOWERCASE = lowercase_pairs(  # lowercase pairs newer than Python's tables
    "1C89>1C8A A7CB>0264 A7CC>A7CD A7CE>A7CF A7D2>A7D3 A7D4>A7D5 A7DA>A7DB A7DC>019B "
    "10D50-10D65>10D70 16EA0-16EB8>16EBB"
)
# The CJK Unified Ideographs range U+2B820..U+2B91F is missing from the Rust tables (see is_chinese_char).

# Letters (L*) and numbers (N*) to the Rust `tokenizers` crate's regular expressions (GPT-2's split in
# ByteLevel), unassigned (Cn) in Python's tables; found by splitting "a" + c and "1" + c with both for
# every code point (scripts/make_family_tokenizers.py --sweep re-checks them). Nothing else differs.
NEWER_LETTERS = code_points(
    "1C89-1C8A A7CB-A7CD A7DA-A7DC 105C0-105F3 10D4A-10D65 10D6F-10D85 10EC2-10EC4 1123F-11240 11380-11389 "
    "1138B 1138E 11390-113B5 113B7 113D1 113D3 11BC0-11BE0 11F02 11F04-11F10 11F12-11F33 1342F 13441-13446 "
    "13460-143FA 16100-1611D 16D40-16D6C 18CFF 1B132 1B155 1DF25-1DF2A 1E030-1E06D 1E4D0-1E4EB 1E5D0-1E5ED "
    "1E5F0 2B739 2EBF0-2EE5D 31350-323AF"
)
NEWER_NUMBERS = code_points(
    "10D40-10D49 116D0-116E3 11BF0-11BF9 11F50-11F59 16130-16139 16D70-16D79 1CCF0-1CCF9 1D2C0-1D2D3 "
    "1E4F0-1E4F9 1E5F1-1E5FA"
)

# every character of the tables above
DIFFERENCES = (
    NEW_FORMAT_CHARS
    | NEW_PUNCTUATION
    | OLD_PUNCTUATION
    | NEW_NONSPACING_MARKS
    | OLD_NONSPACING_MARKS
    | NEW_DECOMPOSITIONS
    | NEW_COMPATIBILITY_DECOMPOSITIONS
    | NEW_COMBINING_MARKS
    | frozenset(NEW_LOWERCASE)
)
