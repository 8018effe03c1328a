"""SentencePiece's compiled character map (tokenizer.json's Precompiled normalizer, `precompiled_charsmap`).

SentencePiece compiles its normalization rules (NFKC plus its own, e.g. control characters removed) into
one blob, base64 in tokenizer.json:

    uint32 trie_size | trie_size bytes: a double-array trie (Darts) over UTF-8 keys | normalized strings

Each key of the trie is a character sequence; its value is the offset of the replacement in the strings
blob (NUL-terminated). The Rust `tokenizers` crate (spm_precompiled) applies it grapheme by grapheme:

    for each extended grapheme cluster g of the text:
        if g is under 6 bytes and some key is a prefix of g: g -> the replacement of the SHORTEST such key
        else, for each character c of g: c -> its replacement if c has a key, else c

(the whole grapheme goes even when the key covers only its start: that is how SentencePiece does it).
The grapheme clusters are Unicode's extended ones (UAX #29), from `unicodedata` categories; the properties
that need other tables are listed below.
"""

from __future__ import annotations

import base64
import struct
import unicodedata

import numpy as np

from .memo import Memo

LAG_LIMIT = 1 << 16  # characters deleted at a text's start, at most, that `CharsMap.lag` counts


class CharsMap:
    """The character map of a `precompiled_charsmap`."""

    def __init__(self, charsmap: str):
        blob = base64.b64decode(charsmap, validate=True)
        if len(blob) < 4:
            raise ValueError(f"the charsmap holds {len(blob)} of the 4 bytes that give the size of its trie")
        (trie_size,) = struct.unpack_from("<I", blob)
        if trie_size == 0 or trie_size % 4 or 4 + trie_size > len(blob):
            raise ValueError(f"the trie of the charsmap claims {trie_size} bytes of {len(blob) - 4}")
        units = np.frombuffer(blob, dtype="<u4", count=trie_size // 4, offset=4)  # (trie_size / 4,)
        self.strings = blob[4 + trie_size :]
        check_trie(units, self.strings)
        self.units = units.tolist()
        self.transform = Memo(self._transform, 1 << 16)  # a character or grapheme -> its replacement, or None
        self.ascii_kept = frozenset(c for c in map(chr, range(128)) if self.transform[c] is None)  # map to themselves

    def _prefixes(self, key: bytes) -> list[int]:
        """Values (string offsets) of the keys that are prefixes of `key`, shortest first (Darts'
        common prefix search)."""
        units, results = self.units, []
        pos = _offset(units[0])
        for byte in key:
            pos ^= byte
            if byte == 0 or pos >= len(units) or units[pos] & 0x800000FF != byte:  # the unit's label
                break
            unit = units[pos]
            pos ^= _offset(unit)
            if (unit >> 8) & 1:  # a key ends here: its value is in the unit at the new position
                results.append(units[pos] & 0x7FFFFFFF)
        return results

    def _transform(self, chunk: str) -> str | None:
        """The replacement of the shortest key that is a prefix of `chunk`, or None."""
        found = self._prefixes(chunk.encode("utf-8", "surrogatepass"))
        if not found:
            return None
        start = found[0]
        end = self.strings.find(b"\0", start)
        return self.strings[start : len(self.strings) if end < 0 else end].decode("utf-8")

    def changes(self, text: str) -> list[tuple[str, int]] | None:
        """The normalized text as the Rust crate's (character, change) list (see normalizers.Normalized.transform),
        or None when nothing changes."""
        changes: list[tuple[str, int]] = []
        changed = False
        if text.isascii() and "\r" not in text and set(text) <= self.ascii_kept:  # each character its own cluster
            return None
        for first, last in graphemes(text):
            grapheme = text[first:last]
            if last - first > 1 and len(grapheme.encode("utf-8", "surrogatepass")) < 6:
                new = self.transform[grapheme]
                if new is not None:
                    _replace(changes, grapheme, new)
                    changed = True
                    continue
            for c in grapheme:
                new = self.transform[c]
                if new is None:
                    changes.append((c, 0))
                else:
                    _replace(changes, c, new)
                    changed = True
        return changes if changed else None

    def lag(self, text: str, limit: int = LAG_LIMIT) -> int | None:
        """How many characters at the start of `text` the map deletes before it writes one: the alignment of the
        Rust crate leaves them unrecorded (`_replace`), so the offsets of everything after lag behind by as
        many. None when more than `limit` are (`text` may be cut past `limit` characters)."""
        size = 64
        while True:
            deleted, chunk = 0, text[:size]
            for first, last in graphemes(chunk):
                if last == len(chunk) < len(text):
                    break  # the cluster may go on past the chunk: a longer one
                grapheme = text[first:last]
                if last - first > 1 and len(grapheme.encode("utf-8", "surrogatepass")) < 6:
                    new = self.transform[grapheme]
                    if new is not None:
                        if new:
                            return deleted
                        deleted += len(grapheme)
                        continue
                for c in grapheme:
                    if self.transform[c] != "":
                        return deleted
                    deleted += 1
            else:
                return deleted if deleted <= limit else None  # the whole text deleted
            if size > limit:
                return None
            size *= 4


def _replace(changes: list[tuple[str, int]], old: str, new: str) -> None:
    """`old` replaced by `new` in the change list, as spm_precompiled records it: the new characters replace
    the old ones in order; extra new ones are insertions (+1); missing ones are charged to the last character
    written so far (when there is none, at the text's start, they go unrecorded, and the alignment of the
    characters after them shifts: the Rust crate's offsets do exactly that)."""
    diff = len(new) - len(old)
    changes += [(c, 0) for c in new]
    if diff > 0:
        changes[-diff:] = [(c, 1) for c, _ in changes[-diff:]]
    elif diff < 0 and changes:
        changes[-1] = (changes[-1][0], changes[-1][1] + diff)


def check_trie(units: np.ndarray, strings: bytes) -> None:
    """Refuse a trie that would read outside itself or its strings (a ValueError saying where): every key that
    ends must point at a unit of the trie, whose value must start a NUL-terminated UTF-8 string of the blob. The
    trie is walked breadth first from its root, a byte at a time for all 255 bytes (units no key reaches may hold
    anything: SentencePiece leaves them so)."""
    units = units.astype(np.int64)
    n = len(units)
    labels = units & 0x800000FF  # a unit's label: the byte that leads to it (a set high bit: no label)
    parents = np.where((labels > 0) & (labels < 256), np.arange(n) ^ labels, -1)  # the base it is a child of
    seen = np.zeros(n, dtype=bool)
    values = []
    bases = np.array([_offset(int(units[0]))])  # where the children of the nodes of this level are
    while bases.size:
        children = np.flatnonzero(np.isin(parents, bases) & ~seen)  # (a crafted trie could loop: each unit once)
        seen[children] = True
        bases = children ^ ((units[children] >> 10) << ((units[children] & (1 << 9)) >> 6))
        ends = bases[((units[children] >> 8) & 1) == 1]  # a key ends at the child: its value is at the new base
        if ends.size and ends.max() >= n:
            raise ValueError(f"a key of the trie points at unit {int(ends.max())} of {n}")
        values.append(units[ends] & 0x7FFFFFFF)
    for value in np.unique(np.concatenate(values)).tolist():
        end = strings.find(b"\0", value)
        if value >= len(strings) or end < 0:
            raise ValueError(f"a key of the trie points at byte {value} of {len(strings)} bytes of strings")
        try:
            strings[value:end].decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"the string at byte {value} of the charsmap is not UTF-8") from None


def _offset(unit: int) -> int:
    """Where a Darts unit's children are, relative to it."""
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


# --- extended grapheme clusters (UAX #29) -----------------------------------------------------------------
# Grapheme_Cluster_Break values from unicodedata's categories, plus the few code points whose value the
# categories do not give. Prepend and Extended_Pictographic (emoji ZWJ sequences, 6 bytes and more anyway)
# are left out: no cluster under 6 bytes depends on them.

EXTEND_MC = frozenset(  # Grapheme_Extend characters of other categories (Mc, Cf ZWNJ)
    map(
        chr,
        [0x09BE, 0x09D7, 0x0B3E, 0x0B57, 0x0BBE, 0x0BD7, 0x0CC2, 0x0CD5, 0x0CD6, 0x0D3E, 0x0D57, 0x0DCF, 0x0DDF]
        + [0x1B35, 0x200C, 0x302E, 0x302F, 0x1D165, *range(0x1D16E, 0x1D173), 0xFF9E, 0xFF9F],
    )
)
SPACING_LO = frozenset("\u0e33\u0eb3")  # Thai and Lao SARA AM: letters that are spacing marks


def _break_class(c: str) -> str:
    """The character's Grapheme_Cluster_Break value (CR, LF, Control, Extend, ZWJ, RI, SpacingMark, L, V, T,
    LV, LVT or Other)."""
    if c in "\r\n":
        return "CR" if c == "\r" else "LF"
    if c == "\u200d":
        return "ZWJ"
    code, category = ord(c), unicodedata.category(c)
    if category in ("Mn", "Me") or c in EXTEND_MC or 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F:
        return "Extend"
    if category in ("Cc", "Zl", "Zp", "Cs") or (category == "Cf" and not 0x600 <= code <= 0x605):
        return "Control"
    if category == "Mc" or c in SPACING_LO:
        return "SpacingMark"
    if 0x1F1E6 <= code <= 0x1F1FF:
        return "RI"
    if 0x1100 <= code <= 0x115F or 0xA960 <= code <= 0xA97C:
        return "L"
    if 0x1160 <= code <= 0x11A7 or 0xD7B0 <= code <= 0xD7C6:
        return "V"
    if 0x11A8 <= code <= 0x11FF or 0xD7CB <= code <= 0xD7FB:
        return "T"
    if 0xAC00 <= code <= 0xD7A3:
        return "LV" if (code - 0xAC00) % 28 == 0 else "LVT"
    return "Other"


break_class = Memo(_break_class, 1 << 16)  # break_class[c]: the character's Grapheme_Cluster_Break value

HANGUL_JOINS = {("L", "L"), ("L", "V"), ("L", "LV"), ("L", "LVT"), ("LV", "V"), ("LV", "T"), ("V", "V")}
HANGUL_JOINS |= {("V", "T"), ("LVT", "T"), ("T", "T")}


def joins(before: str, after: str, regional_run: int) -> bool:
    """Whether no cluster boundary falls between characters of classes `before` and `after` (regional_run:
    how many RI characters end the text before the boundary)."""
    if before == "CR" and after == "LF":
        return True
    if before in ("CR", "LF", "Control") or after in ("CR", "LF", "Control"):
        return False
    if (before, after) in HANGUL_JOINS or after in ("Extend", "ZWJ", "SpacingMark"):
        return True
    return before == after == "RI" and regional_run % 2 == 1


def graphemes(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each extended grapheme cluster of `text`."""
    spans, start, regional_run = [], 0, 0
    before = None
    for i, c in enumerate(text):
        after = break_class[c]
        if before is not None and not joins(before, after, regional_run):
            spans.append((start, i))
            start = i
        regional_run = regional_run + 1 if after == "RI" else 0
        before = after
    if text:
        spans.append((start, len(text)))
    return spans
