"""The inputs users and attackers send, as hypothesis strategies, and the checks of the contract (docs/contract.md)
every entry point is held to: tests/test_contract.py draws from here, scripts/fuzz_contract.py runs it long.

    texts(), batches()            str and lists of str at their edges, and what is not a str at all
    hostile_numbers               a numeric option or config field at its edges: 0, negative, NaN, infinite, huge, a str
    object_of(schema, ...)        a JSON object near an OpenAPI schema: its fields valid, or some hostile
    refused(error)                an exception is a refusal the contract allows: documented, one line, numbert's own
    finite(value)                 every float in an answer is finite
    time_bound()                  a generous bound on one case's time (SECONDS)
    strict_json(text)             a server's body parsed by a parser that rejects NaN and Infinity

The example budget: a fixed, derandomized one in CI (EXAMPLES per property); NUMBERT_CONTRACT_EXAMPLES=N makes it N
per property and random (scripts/fuzz_contract.py: the soak).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import linecache
import math
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

SOAK = int(os.environ.get("NUMBERT_CONTRACT_EXAMPLES", "0"))
EXAMPLES = 25  # per property in CI: derandomized, so every run tries the same cases


def budget(examples: int = EXAMPLES) -> settings:
    """The hypothesis settings of a contract property: `examples` fixed cases, or the soak's random ones."""
    return settings(
        max_examples=SOAK or examples,
        derandomize=not SOAK,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# --- texts and batches ------------------------------------------------------------------------------------

CONTROL = "".join(map(chr, [*range(32), 127, *range(0x80, 0xA0)])) + "\u200b\u200d\u200e\u2028\u2029\ufeff\ufffe\uffff"
SCRIPTS = (
    "Москва — столица России.",
    "東京は日本の首都です。",
    "北京欢迎你",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "ประเทศไทย",
    "안녕하세요",
    "Καλημέρα",
    "გამარჯობა",
    "🙂👍🏽‍👩‍👩‍👧",
    "e\u0301\u0301\u0301",
    "ﬁ Ⅻ ㎏ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "Café naïve résumé",
)
SPECIALS = ("[MASK]", "[CLS] [SEP]", "<s></s>", "<mask>", "[PAD]" * 5, "[UNK]", "[Q] ", "[D] ")
LONG = ("word " * 20_000, "x" * 100_000, "東" * 100_000, "🙂" * 100_000)  # 100,000 characters each

pieces = st.one_of(
    st.just(""),
    st.sampled_from([" ", "\t\n ", "\u3000\u00a0\u2003", "\r\n" * 3]),
    st.text(alphabet=st.sampled_from(CONTROL), min_size=1, max_size=12),
    st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=3),  # lone surrogates
    st.text(max_size=30),  # any code point of any plane
    st.sampled_from(SCRIPTS),
    st.sampled_from(SPECIALS),
    st.sampled_from(["The cat sat on the mat.", "a", "Who painted the Mona Lisa?", "bank"]),
)


def texts(long: bool = True) -> st.SearchStrategy[str]:
    """A text at its edges: empty, whitespace only, control characters, lone surrogates, any script, specials,
    and (long=True) 100,000 characters."""
    joined = st.lists(pieces, max_size=4).map("".join)
    return st.one_of(joined, st.sampled_from(LONG)) if long else joined


not_texts = st.one_of(
    st.none(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.binary(max_size=8),
    st.booleans(),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def batches(long: bool = True) -> st.SearchStrategy:
    """What a caller passes as texts: one text, a list of them (empty, one, several), mixed types, nested."""
    plain = st.sampled_from(["The cat sat on the mat.", "a", "Who painted the Mona Lisa?", "bank"])
    return st.one_of(
        texts(long),
        st.lists(texts(long=False), min_size=1, max_size=4),
        plain,
        st.lists(plain, min_size=1, max_size=3),
        st.just([]),
        st.lists(st.one_of(texts(long=False), not_texts), min_size=1, max_size=3),
        st.lists(st.lists(texts(long=False), max_size=2), min_size=1, max_size=2),
        not_texts,
    )


# --- numbers at their edges ------------------------------------------------------------------------------------

HOSTILE_NUMBERS = (
    0,
    -1,
    -16,
    1,
    2**31,
    2**63,
    10**9,
    1e308,
    1e9,
    0.5,
    math.nan,
    math.inf,
    -math.inf,
    "8",
    None,
    True,
    [],
)
hostile_numbers = st.sampled_from(HOSTILE_NUMBERS)
small_ints = st.one_of(st.integers(1, 8), st.integers(1, 8), hostile_numbers)


# --- JSON near a schema ------------------------------------------------------------------------------------


def resolve(schema: dict, components: dict) -> dict:
    while "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def any_json(depth: int = 2) -> st.SearchStrategy:
    leaves = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), texts(long=False)
    )
    if depth == 0:
        return leaves
    inner = any_json(depth - 1)
    return st.one_of(leaves, st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3))


def valid_value(schema: dict, components: dict, depth: int = 0) -> st.SearchStrategy:
    """A value of `schema`'s type (strings at their edges, integers from 0 to huge), not always within its bounds."""
    schema = resolve(schema, components)
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema or "oneOf" in schema:
        return st.one_of([valid_value(s, components, depth) for s in schema.get("anyOf", schema.get("oneOf"))])
    kind = schema.get("type")
    if kind == "string":
        plain = st.sampled_from(["The cat sat on the mat.", "a", "Who painted the Mona Lisa?"])
        return st.one_of(plain, plain, texts(long=depth == 0))
    if kind == "integer":
        return st.one_of(st.integers(0, 40), st.sampled_from([0, 1, 2**31, 2**63, -1]))
    if kind == "number":
        return st.one_of(st.floats(-10, 10), st.sampled_from([0.0, 1e308, -1e308]))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = valid_value(schema.get("items", {}), components, depth + 1)
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=4) | st.just([])
    if kind == "object":
        return object_of(schema, components, depth + 1)
    return any_json(1)


def object_of(schema: dict, components: dict, depth: int = 0, fields: dict | None = None) -> st.SearchStrategy[dict]:
    """An object with the schema's required fields and some optional ones, each a value of its type (or of `fields`'
    strategy for that name), or (one in seven) any JSON value at all."""
    schema = resolve(schema, components)
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))

    def field(name: str) -> st.SearchStrategy:
        valid = (fields or {}).get(name) or valid_value(properties[name], components, depth)
        return st.one_of(*[valid] * 6, any_json(1))

    optional = st.fixed_dictionaries(
        {n: field(n) for n in properties if n in required},
        optional={n: field(n) for n in properties if n not in required},
    )
    return optional


# --- the checks ----------------------------------------------------------------------------------------------

REFUSALS = (ValueError, TypeError, OSError)  # what numbert raises at its boundary (docs/contract.md)
NOT_REFUSALS = (UnicodeError,)  # ValueErrors of the codecs: a text numbert did not check
NUMBERT = str(Path(__file__).resolve().parent.parent / "numbert")
MESSAGE_LIMIT = 4096  # characters of one error line


def raised_by_numbert(error: BaseException) -> bool:
    """The exception was raised by a `raise` statement of numbert's own code (not by NumPy, the standard library
    or a Python operation failing deep inside)."""
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename = tb.tb_frame.f_code.co_filename
    if not os.path.abspath(filename).startswith(NUMBERT):
        return False
    lines = [linecache.getline(filename, n).strip() for n in range(tb.tb_lineno, max(tb.tb_lineno - 4, 0), -1)]
    return any(line.startswith("raise") for line in lines)


def refused(error: BaseException) -> str | None:
    """Why `error` is not a refusal the contract allows (None: it is one): a ValueError, TypeError or OSError with a
    one-line message; a ValueError or TypeError raised by numbert itself."""
    message = str(error)
    if not isinstance(error, REFUSALS) or isinstance(error, NOT_REFUSALS):
        return f"{type(error).__name__} is not a documented refusal: {message[:300]}"
    if not message.strip() or "\n" in message.strip() or len(message) > MESSAGE_LIMIT:
        return f"{type(error).__name__}'s message is not one line (of at most {MESSAGE_LIMIT}): {message[:300]!r}"
    if not isinstance(error, OSError) and not raised_by_numbert(error):
        return f"{type(error).__name__} from deep inside, not numbert's own refusal: {message[:300]}"
    return None


def floats_of(value, depth: int = 0):
    """Every float an answer holds (arrays, numbers, lists, dicts, dataclasses, named tuples), as arrays."""
    if depth > 6:
        return
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc":
            yield value
        elif value.dtype == object:
            for v in value.ravel():
                yield from floats_of(v, depth + 1)
    elif isinstance(value, (float, np.floating)):
        yield np.asarray(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from floats_of(v, depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from floats_of(v, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from floats_of(getattr(value, f.name), depth + 1)


def finite(value) -> bool:
    """Every float `value` holds is finite, in float32 too (numbert's numbers are float32)."""
    with np.errstate(over="ignore"):
        return all(np.isfinite(a).all() and np.isfinite(a.astype(np.complex64)).all() for a in floats_of(value))


SECONDS = 30  # a generous bound on one generated case (the inputs are at most 100,000 characters, models tiny)


@contextlib.contextmanager
def time_bound(seconds: int = SECONDS) -> Iterator[None]:
    """Fail the block (TimeoutError) past `seconds`: a case that hangs fails instead of holding the suite."""

    def expire(signum, frame):
        raise TimeoutError(f"a generated case took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def strict_json(text: str):
    """The body parsed as JSON that Python's json module would refuse to write with allow_nan=False."""
    return json.loads(text, parse_constant=no_constant)
