"""A tokenizer.json regular expression: Oniguruma's dialect, read as the Rust `tokenizers` library reads it, and
matched in bounded time.

A Split pre-tokenizer or a Replace normalizer carries a pattern, `{"Regex": ...}` or `{"String": ...}`. The Rust
library compiles both with Oniguruma (a String as its escaped text), in Oniguruma's own syntax. Its meaning
differs from Python's `re` in places that change tokens silently, so numbert compiles every such pattern with the
`regex` package (version 1 behaviour: nested classes, `&&`, scoped flags, full case folding) after `translate`
has spelled Oniguruma's meaning in its syntax:

    ^  $            line anchors always: ^ at the start and after every "\\n" but the last character's, $ before
                    every "\\n" and at the end
    \\Z  \\z          before a final "\\n" or at the end; the very end
    \\w \\d \\s \\b \\h  Oniguruma's Unicode sets: \\w alphabetic characters, marks, decimal numbers, connector
                    punctuation; \\d decimal numbers; \\s White_Space; \\h a hexadecimal digit [0-9a-fA-F] (not
                    horizontal space)
    [[:digit:]]     POSIX brackets with Oniguruma's Unicode meaning (digit: Nd; alpha: Alphabetic; punct:
                    punctuation and symbols; ...)
    \\R \\N \\O        a line break (\\r\\n first); any character but "\\n"; any character
    (?m)            Oniguruma's m: "." matches "\\n" too (Python's s)
    a(?i)b|c        an isolated option reaches to the end of its group: a(?i:b|c)
    \\x{41} \\e \\cA  code points, escape, control characters
    \\k<n> \\g<n>     back-reference, subexpression call

Possessive quantifiers and atomic groups are the `regex` package's own. What it cannot read as Oniguruma does is
refused when the file is read, naming the construct: the W/D/S/P/y options, absent groups `(?~...)`, `\\y`, `\\Y`,
`\\C-x`, `\\M-x`, relative back-references, and Oniguruma's `{n}?` (greedy, optional; lazy in Python) and
`{n,m}+` (a repeat of a repeat; possessive in Python).

Matches are found as Oniguruma's iterator finds them (`Pattern.spans`): each search starts where the last match
ended, and an empty match right where the last match ended is skipped, one character on. So Split "" on "ab"
gives "a", "b", and `x*` on "axb" matches "", "x", "" (Python's `finditer` gives a fourth).

Every search of a text is bounded: `MATCH_SECONDS` plus `MATCH_SECONDS_PER_CHAR` a character of the matching
thread's CPU time (the `regex` package's `timeout` counts the process's CPU time, other threads' included: a search
it stops before this thread's bound is spent goes on from its last match; on a busy machine the wall time is longer),
for all the searches of one text together, with the GIL released while the `regex` package matches
(`concurrent=True`): a pattern that backtracks catastrophically costs one text at most that long, and other threads
run meanwhile. Past it, `PatternTimeout` names the file, the field and the pattern (Oniguruma, whose backtracking
the `regex` package often avoids, stops at its retry limit instead, with an error). A caller may set a deadline as
well (`deadline`: the server's --request-timeout), so that a request it has given up on stops matching; past it,
`DeadlinePassed` (a TimeoutError: the caller's time ran out, the text is not at fault).

The `regex` package's Unicode tables (17.0) are newer than the Rust crate's Oniguruma's (16.0): the characters they
assign and Oniguruma does not (`NEWER_THAN_ONIGURUMA`, measured by sweeping every code point through both) are taken
out of every property and set but the unassigned ones (\\p{Cn}, \\p{C}, \\p{Unknown}), which take them in, and U+0295,
which Unicode 16 moved from Ll to Lo, stays Ll: so Qwen2's split (\\p{L}, \\p{N}) classes every code point as Rust
does.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

import regex

MATCH_SECONDS = 1.0  # every text may take this long in one pattern's searches...
MATCH_SECONDS_PER_CHAR = 5e-6  # ... plus this much per character (room for an empty match at every position)
FLAGS = regex.V1 | regex.FULLCASE


# A caller's deadline (time.monotonic()) by which every search in its context ends too: a served request's, so that
# a request answered 504 stops matching (`deadline`). None: the bound per text alone.
DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("numbert_pattern_deadline", default=None)


@contextlib.contextmanager
def deadline(at: float | None) -> Iterator[None]:
    """Every pattern search in this context ends by time.monotonic() `at` (None: no deadline) as well as within its
    bound per text; past `at`, a DeadlinePassed (past the bound, a PatternTimeout)."""
    token = DEADLINE.set(at)
    try:
        yield
    finally:
        DEADLINE.reset(token)


class PatternTimeout(ValueError):
    """A pattern's searches of one text did not finish within their bound (a pattern that backtracks
    catastrophically)."""


class DeadlinePassed(TimeoutError):
    """The caller's deadline (`deadline`) passed while a pattern was still searching: the caller gave up, the text
    is not at fault (a server answers 504, as for any request past its --request-timeout, not 422)."""


# Code points the `regex` package's Unicode assigns and the Rust crate's Oniguruma leaves unassigned (Cn), found by
# matching \p{Cn} with both over every code point (test_tokenizer_gemma_qwen.py's sweep re-checks them).
NEWER_THAN_ONIGURUMA = (
    "0558 058B-058C 05C8-05C9 088F 0B53-0B54 0C5C 0CDC 1ACF-1AF0 208F 209D-209F 20C1-20C4 2B96 2E60-2E63 "
    "A7CE-A7CF A7D2 A7D4 A7DD A7E2 A7F1 AB6C-AB6D FBC3-FBD2 FD90-FD91 FDC8-FDCE 107BB-107BF 10940-10959 "
    "10EC5-10EC7 10EC9-10EEE 10EF0-10EFB 11B0A 11B60-11B67 11DB0-11DDB 11DE0-11DE9 11DF0-11DF1 1246F 12475-1247F "
    "12550-12686 16EA0-16EB8 16EBB-16ED3 16FF2-16FF6 187F8-187FF 18CD6-18CDA 18D09-18D20 18D80-18DF2 18E00-19191 "
    "191A0-191D2 1B123-1B128 1B168 1CCFA-1CCFC 1CEBA-1CED0 1CED2-1CED4 1CEDD-1CEFD 1D127-1D128 1D1EB-1D1FF "
    "1D250-1D281 1D6A6 1DB00-1DB1C 1DF1F-1DF24 1DF2B-1DF81 1DF90-1DF96 1DFCD-1DFFF 1E6C0-1E6DE 1E6E0-1E6F5 "
    "1E6FE-1E6FF 1F1AE 1F6D8-1F6D9 1F777-1F77A 1F7DA-1F7DB 1F7F1-1F7FF 1F8D0-1F8D8 1FA54-1FA57 1FA8A-1FA8E 1FAC8 "
    "1FACC-1FACD 1FADD 1FAEA-1FAEB 1FAEF 1FAF9-1FAFA 1FBFA 2B73A-2B73F 2B81E 2CEA2-2CEAD 323B0-33479 3D000-3FC3F"
)


def class_body(ranges: str) -> str:
    """A class body of the `regex` package for hex code points and ranges: "0558 058B-058C" -> "\\U00000558..."."""
    items = (item.partition("-") for item in ranges.split())
    return "".join(f"\\U{int(a, 16):08x}" + (f"-\\U{int(b, 16):08x}" if b else "") for a, _, b in items)


NEWER = class_body(NEWER_THAN_ONIGURUMA)


def as_oniguruma(body: str) -> str:
    """A class body holding what `body` holds, but the characters Oniguruma leaves unassigned."""
    return f"[{body}--[{NEWER}]]"


# Oniguruma's Unicode sets, as the Rust crate's Oniguruma classes every code point (measured: tests/
# test_tokenizer_patterns.py), as class bodies of the `regex` package. Outside a class, \w also holds six
# Latin-1 numbers (Oniguruma's single-byte table); inside one it does not.
WORD = as_oniguruma(r"\p{Alphabetic}\p{M}\p{Nd}\p{Pc}")  # [\w], [[:word:]]
WORD_OUTSIDE = WORD + r"\xb2\xb3\xb9\xbc-\xbe"  # \w
SPACE = r"\p{White_Space}"  # \s, [[:space:]]
HEX = "0-9a-fA-F"  # \h, [[:xdigit:]]
GRAPH = r"[^\p{White_Space}\p{Cc}\p{Cn}\p{Cs}]"
POSIX = {  # [[:name:]] and \p{Name}
    "alnum": as_oniguruma(r"\p{Alphabetic}\p{Nd}"),
    "alpha": as_oniguruma(r"\p{Alphabetic}"),
    "ascii": r"\x00-\x7f",
    "blank": r"\p{Zs}\t",
    "cntrl": r"\p{Cc}",
    "digit": as_oniguruma(r"\p{Nd}"),
    "graph": as_oniguruma(GRAPH),
    "lower": as_oniguruma(r"\p{Lowercase}"),
    "print": as_oniguruma(GRAPH + r"\p{Zs}"),
    "punct": as_oniguruma(r"\p{P}\p{S}"),
    "space": SPACE,
    "upper": as_oniguruma(r"\p{Uppercase}"),
    "xdigit": HEX,
    "word": WORD,
}
CLASS_ESCAPES = {"w": WORD, "s": SPACE, "h": HEX, "d": POSIX["digit"]}  # and their capitals, negated
SIMPLE_ESCAPES = {"z": r"\z", "A": r"\A", "G": r"\G", "K": r"\K", "X": r"\X"}
WORD_CHAR = f"[{WORD_OUTSIDE}]"
BOUNDARY = f"(?:(?<={WORD_CHAR})(?!{WORD_CHAR})|(?<!{WORD_CHAR})(?={WORD_CHAR}))"  # \b, by Oniguruma's \w
NOT_BOUNDARY = f"(?:(?<={WORD_CHAR})(?={WORD_CHAR})|(?<!{WORD_CHAR})(?!{WORD_CHAR}))"
ANCHORS = {
    "^": r"(?:\A|(?<=\n)(?!\z))",  # Oniguruma's ^: not after a newline that ends the text
    "$": r"(?=\n|\z)",
}
LINE_BREAK = r"(?>\r\n|[\n\x0b\x0c\r\x85\u2028\u2029])"  # \R
REFUSED_ESCAPES = {
    "y": "text segment boundaries (\\y)",
    "Y": "text segment boundaries (\\Y)",
    "C": "control characters written \\C-x",
    "M": "meta characters written \\M-x",
}


class Unreadable(ValueError):
    """A construct of Oniguruma's dialect that numbert cannot give Oniguruma's meaning."""


def translate(source: str) -> str:
    """Oniguruma's pattern `source` in the `regex` package's syntax (version 1), with Oniguruma's meaning; an
    `Unreadable` naming the construct it cannot give that meaning."""
    return Translation(source).run()


class Translation:
    """One pass over a pattern, outside and inside classes, keeping the groups open (for isolated options)."""

    def __init__(self, source: str):
        self.source, self.at = source, 0
        self.closers = [0]  # per open group: the isolated options opened in it, each closed with the group

    def peek(self, offset: int = 0) -> str:
        return self.source[self.at + offset : self.at + offset + 1]

    def take(self, count: int = 1) -> str:
        taken = self.source[self.at : self.at + count]
        self.at += count
        return taken

    def run(self) -> str:
        out: list[str] = []
        while self.at < len(self.source):
            c = self.take()
            if c == "\\":
                out.append(self.escape(in_class=False))
            elif c == "[":
                out.append(self.char_class())
            elif c == "(":
                out.append(self.group())
            elif c == ")":
                if len(self.closers) == 1:
                    raise Unreadable("an unmatched ')'")
                out.append(")" * (self.closers.pop() + 1))
            elif c in ANCHORS:
                out.append(ANCHORS[c])
            elif c == "{":
                out.append(self.interval())
            else:
                out.append(c)
        if len(self.closers) != 1:
            raise Unreadable("an unclosed '('")
        return "".join(out) + ")" * self.closers[0]

    def interval(self) -> str:
        """A `{...}` quantifier (or a literal brace, as in Oniguruma when it is none)."""
        match = regex.match(r"\{(\d*)(?:(,)(\d*))?\}", self.source, pos=self.at - 1)
        if match is None or not (match[1] or match[3]):
            return r"\{"
        self.at = match.end()
        low, comma, high = match[1] or "0", match[2] or "", match[3]
        if self.peek() == "?" and not comma:
            raise Unreadable(f"'{match[0]}?' (Oniguruma's optional repeat; a lazy one to Python)")
        if self.peek() == "+":
            raise Unreadable(f"'{match[0]}+' (Oniguruma's repeat of a repeat; a possessive one to Python)")
        return "{" + low + comma + (high or "") + "}"

    def group(self) -> str:
        """A group's opening, after '('."""
        if self.peek() != "?":
            self.closers.append(0)
            return "("
        options = regex.match(r"\?([imx]*)(?:-([imx]*))?([:)])", self.source, pos=self.at)
        if options is not None:
            self.at = options.end()
            spelled = options[1].replace("m", "s") + ("-" + options[2].replace("m", "s") if options[2] else "")
            if options[3] == ")":  # isolated: to the end of the enclosing group
                self.closers[-1] += 1
                return f"(?{spelled}:" if spelled else "(?:"
            self.closers.append(0)
            return f"(?{spelled}:"
        if self.peek(1) == "#":
            end = self.source.find(")", self.at)
            if end < 0:
                raise Unreadable("an unclosed comment '(?#'")
            self.at = end + 1
            return ""
        if self.peek(1) == "~":
            raise Unreadable("absent groups '(?~...)'")
        if self.peek(1) == "'":
            end = self.source.find("'", self.at + 2)
            if end < 0:
                raise Unreadable("an unclosed group name '(?''")
            name = self.source[self.at + 2 : end]
            self.at = end + 1
            self.closers.append(0)
            return f"(?<{name}>"
        if self.peek(1) and (self.peek(1) in "WDSPy" or (self.peek(1) == "-" and self.peek(2) in "WDSPy")):
            raise Unreadable(f"the option '(?{self.source[self.at + 1 : self.at + 3]}' (ASCII-only sets)")
        self.closers.append(0)
        return "("

    def escape(self, in_class: bool) -> str:
        """An escape, after the backslash."""
        c = self.take()
        if c == "":
            raise Unreadable("a pattern ending in '\\'")
        if c.lower() in CLASS_ESCAPES:
            body = WORD_OUTSIDE if c in "wW" and not in_class else CLASS_ESCAPES[c.lower()]
            if c.islower():
                return body if in_class else f"[{body}]"
            return f"[^{body}]"
        if c == "e":
            return r"\x1b"
        if c in SIMPLE_ESCAPES and not in_class:
            return SIMPLE_ESCAPES[c]
        if c == "b":
            return r"\x08" if in_class else BOUNDARY
        if c == "B" and not in_class:
            return NOT_BOUNDARY
        if c == "Z" and not in_class:
            return r"(?=\n?\z)"
        if c == "R" and not in_class:
            return LINE_BREAK
        if c == "N" and not in_class:
            return r"[^\n]"
        if c == "O" and not in_class:
            return r"(?s:.)"
        if c in "xo" and self.peek() == "{":
            end = self.source.find("}", self.at)
            digits = self.source[self.at + 1 : end].split() if end > 0 else []
            try:
                points = [int(d, 16 if c == "x" else 8) for d in digits]
                spelled = "".join(f"\\U{p:08x}" for p in points if p <= 0x10FFFF)
            except ValueError:
                points, spelled = [], ""
            if not points or len(spelled) != 10 * len(points):
                raise Unreadable(f"the code point '\\{c}{self.source[self.at : end + 1]}'")
            self.at = end + 1
            return spelled
        if c == "c":
            control = self.take()
            if not control:
                raise Unreadable("a pattern ending in '\\c'")
            return f"\\x{ord(control) & 0x1F:02x}"
        if c in "pP" and self.peek() == "{":
            return self.property(c == "P")
        if c in "kg" and self.peek() in "<'":
            close = ">" if self.peek() == "<" else "'"
            end = self.source.find(close, self.at + 1)
            name = self.source[self.at + 1 : end] if end > 0 else ""
            if not regex.fullmatch(r"\d+|\w+", name):
                raise Unreadable(f"the reference '\\{c}{self.source[self.at : end + 1]}'")
            self.at = end + 1
            if c == "k":
                return f"\\{name}" if name.isdigit() else f"(?P={name})"
            return f"(?{name})" if name.isdigit() else f"(?&{name})"
        if c in REFUSED_ESCAPES or (in_class and c in "RNOXBAzZGK"):
            raise Unreadable(REFUSED_ESCAPES.get(c) or f"'\\{c}' in a character class")
        return "\\" + c

    def property(self, negated: bool) -> str:
        r"""\p{Name}, \p{^Name}, \P{Name}, after the p; the POSIX names with their POSIX meaning."""
        end = self.source.find("}", self.at)
        if end < 0:
            raise Unreadable("an unclosed '\\p{'")
        name = self.source[self.at + 1 : end]
        self.at = end + 1
        if name.startswith("^"):
            negated, name = not negated, name[1:]
        key = name.lower().replace("_", "").replace(" ", "")
        posix = WORD_OUTSIDE if key == "word" else POSIX.get(key)  # \p{Word} is \w's set, [[:word:]] [\w]'s
        if posix is None:
            posix = property_as_oniguruma(name, key)
        return f"[{'^' if negated else ''}{posix}]"

    def char_class(self) -> str:
        """A character class, after '[': nested classes, && and POSIX brackets as Oniguruma reads them; '|', '~'
        and a second '-' literal (operators of the `regex` package's sets when doubled)."""
        out = ["["]
        if self.peek() == "^":
            out.append(self.take())
        first = True
        while True:
            c = self.take()
            if c == "":
                raise Unreadable("an unclosed '['")
            if c == "]" and not first:
                out.append("]")
                return "".join(out)
            if c == "]":
                out.append(r"\]")
            elif c == "\\":
                out.append(self.escape(in_class=True))
            elif c == "[" and self.peek() == ":":
                out.append(self.posix())
            elif c == "[":
                out.append(self.char_class())
            elif c in "|~":
                out.append("\\" + c)
            elif c == "-" and self.peek() == "-":
                out.append("-\\" + self.take())
            else:
                out.append(c)
            first = False

    def posix(self) -> str:
        """A POSIX bracket [:name:] or [:^name:], after '['."""
        match = regex.match(r":(\^?)([a-z]+):\]", self.source, pos=self.at)
        if match is None or match[2] not in POSIX:
            raise Unreadable(f"the POSIX bracket '[{self.source[self.at : self.at + 10]}'")
        self.at = match.end()
        body = POSIX[match[2]]
        return f"[^{body}]" if match[1] else f"[{body}]"


def property_as_oniguruma(name: str, key: str) -> str:
    """The class body of \\p{name} (`key`: its name lower-cased, without spaces and underscores) as Oniguruma's
    Unicode 16 tables hold it: the characters it leaves unassigned belong to Cn, C and Unknown only; U+0295 is Ll."""
    body = f"\\p{{{name}}}"
    if key in ("cn", "unassigned", "c", "other", "zzzz", "unknown"):
        return body + NEWER
    if key == "any":
        return body
    if key in ("ll", "lowercaseletter", "lc", "l&", "casedletter"):
        return as_oniguruma(body) + r"\u0295"
    if key in ("lo", "otherletter"):
        return f"[{body}--[{NEWER}\\u0295]]"
    return as_oniguruma(body)


class Pattern:
    """A tokenizer.json pattern compiled with Oniguruma's meaning: `spans(text)` finds its matches as Oniguruma
    does, in bounded time. `origin` names where it was read ("tokenizer.json: normalizer.pattern")."""

    def __init__(self, source: str, literal: bool, origin: str):
        self.source, self.literal, self.origin = source, literal, origin
        try:
            self.compiled = regex.compile(regex.escape(source) if literal else translate(source), FLAGS)
        except regex.error as e:
            raise Unreadable(str(e)) from None

    def __repr__(self) -> str:
        return f"Pattern({self.source!r}, literal={self.literal})"

    def bound(self, text: str) -> float:
        """Seconds of CPU time the searches of `text` may take together."""
        return MATCH_SECONDS + MATCH_SECONDS_PER_CHAR * len(text)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The (start, end) of every match in `text`, as Oniguruma's iterator finds them (the module's docstring);
        a PatternTimeout past the text's bound.

        Oniguruma searches again from each match's end, and skips an empty match found right there, searching
        from one character on. The `regex` package's `finditer` gives the same matches after a non-empty one;
        after an empty one it looks for a non-empty match at the same place, so the search starts over there
        from one character on, as Oniguruma's does."""
        if not text:
            return []
        found: list[tuple[int, int]] = []
        at, last_end = 0, -1
        end_cpu, end_wall = time.thread_time() + self.bound(text), DEADLINE.get()
        while at <= len(text):
            try:
                for match in self.compiled.finditer(text, at, timeout=self.left(end_cpu, end_wall), concurrent=True):
                    start, end = match.span()
                    if start == end:
                        if end != last_end:  # an empty match right where the last one ended is skipped
                            found.append((start, end))
                            last_end = end
                        at = end + 1
                        break
                    found.append((start, end))
                    last_end = at = end  # where the search goes on if the package's clock stops it (below)
                    self.left(end_cpu, end_wall)
                else:
                    break
            except TimeoutError:
                if self.spent(end_cpu, end_wall):
                    raise self.timeout(text, end_wall) from None
                # the package's clock ran out before this thread's CPU bound did (the other threads' time counts in
                # it): the search goes on from the last match, with what is left of the bound
        return found

    @staticmethod
    def spent(end_cpu: float, end_wall: float | None) -> bool:
        """Whether this thread's CPU bound or the caller's deadline has passed."""
        return time.thread_time() >= end_cpu or (end_wall is not None and time.monotonic() >= end_wall)

    @staticmethod
    def left(end_cpu: float, end_wall: float | None) -> float:
        """Seconds left until the text's bound (CPU time) or the caller's deadline (wall time), whichever is first;
        a TimeoutError when none are."""
        left = end_cpu - time.thread_time()
        if end_wall is not None:
            left = min(left, end_wall - time.monotonic())
        if left <= 0:
            raise TimeoutError
        return left

    def fullmatch(self, text: str) -> bool:
        """Whether the pattern matches all of `text` (a break's character, cuts.py)."""
        end_cpu, end_wall = time.thread_time() + self.bound(text), DEADLINE.get()
        while True:
            try:
                return self.compiled.fullmatch(text, timeout=self.left(end_cpu, end_wall), concurrent=True) is not None
            except TimeoutError:
                if self.spent(end_cpu, end_wall):
                    raise self.timeout(text, end_wall) from None

    def timeout(self, text: str, end_wall: float | None) -> PatternTimeout | DeadlinePassed:
        """The error for searches of `text` stopped: by the caller's deadline if it has passed, else by the bound."""
        shown = self.source if len(self.source) <= 80 else self.source[:77] + "..."
        unfinished = f"{self.origin}: the pattern {shown!r} did not finish matching a text of {len(text):,} characters"
        if end_wall is not None and time.monotonic() >= end_wall:
            return DeadlinePassed(f"{unfinished} before its caller's deadline")
        return PatternTimeout(
            f"{unfinished} within {self.bound(text):.1f} s (numbert bounds every tokenizer.json pattern, "
            "numbert.tokenizer.patterns.MATCH_SECONDS): it backtracks catastrophically on this text"
        )
