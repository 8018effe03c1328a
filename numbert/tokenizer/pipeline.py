"""BERT's relatives' tokenizers from a tokenizer.json: byte-level BPE (RoBERTa, GPT-2) and SentencePiece
Unigram (XLM-RoBERTa), token for token the Rust `tokenizers` library's.

A tokenizer.json is a pipeline; each stage is read into the functions of one module:

    added_tokens    special tokens, cut out of the raw text whole (with lstrip / rstrip whitespace)
    normalizer      normalizers.py (NFKC, Lowercase, Strip, Replace, Precompiled, Sequence, ...)
    pre_tokenizer   pre_tokenizers.py (ByteLevel, Metaspace, WhitespaceSplit, Split, Digits, Sequence)
    model           bpe.py (BPE) or unigram.py (Unigram); WordPiece is tokenizer.py's own path
    post_processor  templates.py (RobertaProcessing, TemplateProcessing, BertProcessing, ByteLevel, Sequence)
    decoder         ByteLevel, Metaspace

A component numbert does not implement is refused when the file is read, naming it and listing what is
supported. `PipelineTokenizer` has the `Tokenizer`'s interface (encode, encode_batch, __call__, pad,
decode, truncation and overflowing windows).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import normalizers, pre_tokenizers
from .bpe import BPE
from .encoding import Encoding, Segment
from .fast import Memo
from .normalizers import Normalized
from .pipeline_fast import MEMO_SIZE, ByteLevelWords, MetaspaceWords
from .precompiled import Precompiled
from .templates import Template, read_template
from .tokenizer import Tokenizer
from .tokenizer_json import read_json_object
from .truncation import check_side
from .unigram import Unigram

SUPPORTED = {
    "model": ("BPE", "Unigram", "WordPiece"),
    "normalizer": ("Sequence", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Strip", "Replace", "Precompiled"),
    "pre_tokenizer": ("Sequence", "ByteLevel", "Metaspace", "WhitespaceSplit", "Split", "Digits"),
    "decoder": ("ByteLevel", "Metaspace"),
}
# A text is tokenized whole up to MAX_INPUT_CHARS characters; past that, only a truncating encode is
# served, from a prefix (see PipelineTokenizer._segment), so memory stays bounded on hostile lines.
MAX_INPUT_CHARS = 1_000_000


class TokenizerJson:
    """A tokenizer.json's contents, read part by part; errors name the file and the field."""

    def __init__(self, path: Path):
        self.path = path
        self.spec = read_json_object(path)

    def error(self, field: str, message: str) -> ValueError:
        return ValueError(f"{self.path}: {field} {message}")

    def unsupported(self, field: str, kind: Any, section: str) -> ValueError:
        return self.error(
            field,
            f"is {json.dumps(kind)[:100]}, which numbert does not implement; it supports {section}s of type "
            + ", ".join(SUPPORTED[section]),
        )

    def component(self, field: str, value: Any, section: str) -> tuple[str, dict]:
        """(type, settings) of a pipeline component, refused unless an object of a supported type."""
        if not isinstance(value, dict):
            raise self.error(field, f"must be an object with a 'type', not {json.dumps(value)[:100]}")
        if value.get("type") not in SUPPORTED[section]:
            raise self.unsupported(f"{field}.type", value.get("type"), section)
        return value["type"], value

    def flag(self, field: str, value: Any, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(field, f"must be true or false, not {json.dumps(value)[:100]}")
        return value

    def pattern(self, field: str, value: Any) -> re.Pattern:
        """A {"String": s} or {"Regex": r} pattern (the Rust crate's regular expressions read as Python's)."""
        if isinstance(value, dict) and isinstance(value.get("String"), str):
            return re.compile(re.escape(value["String"]))
        if isinstance(value, dict) and isinstance(value.get("Regex"), str):
            try:
                return re.compile(value["Regex"].replace(r"\z", r"\Z"))
            except re.error as e:
                raise self.error(field, f"holds a regular expression Python cannot read ({e})") from None
        raise self.error(field, f'must be {{"String": ...}} or {{"Regex": ...}}, not {json.dumps(value)[:100]}')

    # -- the stages ---------------------------------------------------------------------------------------

    def normalizer(self, value: Any, field: str = "normalizer") -> Callable[[Normalized], Normalized] | None:
        if value is None:
            return None
        kind, spec = self.component(field, value, "normalizer")
        if kind == "Sequence":
            steps = spec.get("normalizers")
            if not isinstance(steps, list):
                raise self.error(f"{field}.normalizers", "must be a list")
            return normalizers.sequence([self.normalizer(s, f"{field}.normalizers[{i}]") for i, s in enumerate(steps)])  # type: ignore[misc]
        if kind in ("NFC", "NFD", "NFKC", "NFKD"):
            return normalizers.unicode_form(kind)  # type: ignore[arg-type]
        if kind == "Lowercase":
            return normalizers.lowercase
        if kind == "Strip":
            return normalizers.strip(
                self.flag(f"{field}.strip_left", spec.get("strip_left"), True),
                self.flag(f"{field}.strip_right", spec.get("strip_right"), True),
            )
        if kind == "Replace":
            if not isinstance(spec.get("content"), str):
                raise self.error(f"{field}.content", "must be a string")
            return normalizers.replace(self.pattern(f"{field}.pattern", spec.get("pattern")), spec["content"])
        charsmap = spec.get("precompiled_charsmap")
        if not isinstance(charsmap, str):
            raise self.error(f"{field}.precompiled_charsmap", "must be a base64 string")
        try:
            return normalizers.precompiled(Precompiled(charsmap))
        except (ValueError, IndexError) as e:
            raise self.error(f"{field}.precompiled_charsmap", f"is not a SentencePiece charsmap ({e})") from None

    def pre_tokenizer(self, value: Any, field: str = "pre_tokenizer") -> pre_tokenizers.PreTokenizer | None:
        if value is None:
            return None
        kind, spec = self.component(field, value, "pre_tokenizer")
        if kind == "Sequence":
            steps = spec.get("pretokenizers")
            if not isinstance(steps, list):
                raise self.error(f"{field}.pretokenizers", "must be a list")
            return pre_tokenizers.sequence(
                [self.pre_tokenizer(s, f"{field}.pretokenizers[{i}]") for i, s in enumerate(steps)]  # type: ignore[misc]
            )
        if kind == "ByteLevel":
            return pre_tokenizers.byte_level(
                self.flag(f"{field}.add_prefix_space", spec.get("add_prefix_space"), True),
                self.flag(f"{field}.use_regex", spec.get("use_regex"), True),
            )
        if kind == "Metaspace":
            return pre_tokenizers.metaspace(*self.metaspace(field, spec))
        if kind == "WhitespaceSplit":
            return pre_tokenizers.whitespace_split
        if kind == "Digits":
            return pre_tokenizers.digits(self.flag(f"{field}.individual_digits", spec.get("individual_digits"), False))
        behavior = spec.get("behavior")
        if behavior not in pre_tokenizers.BEHAVIORS:
            raise self.error(f"{field}.behavior", f"must be one of {', '.join(pre_tokenizers.BEHAVIORS)}")
        if self.flag(f"{field}.invert", spec.get("invert"), False):
            raise self.error(f"{field}.invert", "is true, which numbert does not implement")
        return pre_tokenizers.pattern_split(self.pattern(f"{field}.pattern", spec.get("pattern")), behavior)

    def metaspace(self, field: str, spec: dict) -> tuple[str, str, bool]:
        """(replacement, prepend_scheme, split) of a Metaspace pre-tokenizer or decoder."""
        replacement = spec.get("replacement", "▁")
        if not (isinstance(replacement, str) and len(replacement) == 1):
            raise self.error(f"{field}.replacement", "must be one character")
        scheme = spec.get("prepend_scheme")
        if scheme is None:  # the older spelling
            scheme = "always" if self.flag(f"{field}.add_prefix_space", spec.get("add_prefix_space"), True) else "never"
        if scheme not in ("always", "first", "never"):
            raise self.error(f"{field}.prepend_scheme", 'must be "always", "first" or "never"')
        return replacement, scheme, self.flag(f"{field}.split", spec.get("split"), True)

    def model(self) -> tuple[BPE | Unigram, dict[str, int]]:
        """The model and its vocabulary (token -> id)."""
        kind, spec = self.component("model", self.spec.get("model"), "model")
        source = str(self.path)
        if kind == "BPE":
            for name in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
                if spec.get(name) not in (None, ""):  # "" (as transformers saves RoBERTa's) adds nothing: none
                    raise self.error(f"model.{name}", f"is {json.dumps(spec[name])}, which numbert does not implement")
            vocab = spec.get("vocab")
            if not (isinstance(vocab, dict) and all(type(i) is int for i in vocab.values())):
                raise self.error("model.vocab", "must map each token to its integer id")
            merges = spec.get("merges")
            if not isinstance(merges, list):
                raise self.error("model.merges", "must be a list")
            pairs = []
            for i, merge in enumerate(merges):  # "left right" (older files) or [left, right]
                pair = merge.split(" ") if isinstance(merge, str) else merge
                if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
                    raise self.error(f"model.merges[{i}]", f"must be two tokens, not {json.dumps(merge)[:100]}")
                pairs.append((pair[0], pair[1]))
            unk = spec.get("unk_token")
            return BPE(
                vocab,
                pairs,
                unk_token=unk,
                fuse_unk=self.flag("model.fuse_unk", spec.get("fuse_unk"), False),
                byte_fallback=self.flag("model.byte_fallback", spec.get("byte_fallback"), False),
                ignore_merges=self.flag("model.ignore_merges", spec.get("ignore_merges"), False),
                source=source,
            ), vocab
        pieces = spec.get("vocab")
        if not isinstance(pieces, list):
            raise self.error("model.vocab", "must be a list of [piece, score]")
        for i, item in enumerate(pieces):
            if not (
                isinstance(item, list)
                and len(item) == 2
                and isinstance(item[0], str)
                and isinstance(item[1], (int, float))
                and not isinstance(item[1], bool)
            ):
                raise self.error(f"model.vocab[{i}]", f"must be [piece, score], not {json.dumps(item)[:100]}")
        unk_id = spec.get("unk_id")
        if unk_id is not None and type(unk_id) is not int:
            raise self.error("model.unk_id", "must be an integer or null")
        model = Unigram(
            [(p, s) for p, s in pieces],
            unk_id,
            self.flag("model.byte_fallback", spec.get("byte_fallback"), False),
            source,
        )
        return model, dict(model.vocab)

    def added_tokens(self, vocab: dict[str, int]) -> list[dict]:
        """The added tokens: content, id (which must agree with the vocabulary), special, lstrip, rstrip."""
        tokens = self.spec.get("added_tokens") or []
        if not isinstance(tokens, list):
            raise self.error("added_tokens", "must be a list")
        out = []
        for i, token in enumerate(tokens):
            field = f"added_tokens[{i}]"
            if not (isinstance(token, dict) and isinstance(token.get("content"), str) and type(token.get("id")) is int):
                raise self.error(field, 'must be {"content": a string, "id": an integer, ...}')
            if not token["content"]:
                raise self.error(field, "has an empty content")
            if token.get("normalized") is True or token.get("single_word") is True:
                raise self.error(
                    field,
                    f"({token['content']!r}) is matched after normalization or as a single word, which numbert "
                    "does not implement: it matches added tokens whole in the raw text",
                )
            if vocab.setdefault(token["content"], token["id"]) != token["id"]:
                raise self.error(
                    field, f"gives {token['content']!r} id {token['id']}, model.vocab {vocab[token['content']]}"
                )
            out.append(
                {
                    "content": token["content"],
                    "special": self.flag(f"{field}.special", token.get("special"), False),
                    "lstrip": self.flag(f"{field}.lstrip", token.get("lstrip"), False),
                    "rstrip": self.flag(f"{field}.rstrip", token.get("rstrip"), False),
                }
            )
        return out

    def decoder(self) -> tuple[str, dict]:
        value = self.spec.get("decoder")
        if value is None:
            return "none", {}
        kind, spec = self.component("decoder", value, "decoder")
        if kind == "Metaspace":
            replacement, scheme, _ = self.metaspace("decoder", spec)
            return kind, {"replacement": replacement, "prepend_scheme": scheme}
        return kind, {}


def added_token_pattern(tokens: Sequence[dict]) -> re.Pattern | None:
    """The added tokens as one regular expression, longest first, each with the whitespace it strips
    (lstrip: on its left, rstrip: on its right) in groups around it."""
    if not tokens:
        return None
    space = f"[{normalizers.WHITESPACE}]*"
    alternatives = [
        (space if t["lstrip"] else "") + re.escape(t["content"]) + (space if t["rstrip"] else "")
        for t in sorted(tokens, key=lambda t: len(t["content"]), reverse=True)
    ]
    return re.compile("|".join(f"({a})" for a in alternatives))


class PipelineTokenizer(Tokenizer):
    """The tokenizer a BPE or Unigram tokenizer.json describes, with the `Tokenizer`'s interface. The named
    tokens (cls, sep, unk, pad, mask) come from the file's post-processor, model and padding, unless given."""

    OPTIONS = ("model_max_length", "truncation_side", "cls_token", "sep_token", "unk_token", "pad_token", "mask_token")
    # ByteLevel keeps a run of spaces as tokens ("ĠĠ"), Metaspace as "▁" pieces unless a normalizer collapses it
    whitespace_runs_matter = True

    def __init__(
        self,
        path: str | os.PathLike | TokenizerJson,
        *,
        model_max_length: int | None = None,
        truncation_side: str = "right",
        **tokens: str,
    ):
        spec = path if isinstance(path, TokenizerJson) else TokenizerJson(Path(path))
        unknown = set(tokens) - set(self.OPTIONS)
        if unknown:
            raise TypeError(f"unexpected options {sorted(unknown)}; a {spec.path.name} tokenizer takes {self.OPTIONS}")
        self.vocab_file = spec.path
        self.model, vocab = spec.model()
        added = spec.added_tokens(vocab)
        self.vocab = vocab
        self.vocab_size = len(vocab)
        self._id_to_token = {i: t for t, i in vocab.items()}
        # word -> the model's (id, token, start, end) of it
        self._model_tokens = Memo(self.model.tokenize, MEMO_SIZE)
        self._normalizer = spec.normalizer(spec.spec.get("normalizer"))
        self._pre_tokenizer = spec.pre_tokenizer(spec.spec.get("pre_tokenizer"))
        self._decoder = spec.decoder()
        # The fast path of the common pipelines (pipeline_fast.py), or None: the stages
        self._fast_words = self._fast_path(spec.spec.get("pre_tokenizer"), spec)
        self.template: Template = read_template(spec, vocab)
        self._added = added
        self._added_pattern = added_token_pattern(added)
        self._added_by_group = [t["content"] for t in sorted(added, key=lambda t: len(t["content"]), reverse=True)]
        self.special_tokens = [t["content"] for t in added if t["special"]]
        self._special_ids = {vocab[t] for t in self.special_tokens}
        self.added_tokens: list[str] = []  # tokens the vocabulary lacks (none: added tokens carry their ids)
        self.model_max_length = model_max_length
        self.truncation_side = check_side(truncation_side)
        cls, sep = self.template.named_tokens()
        self.cls_token = tokens.get("cls_token") or cls or _first_in(vocab, "<s>", "[CLS]") or self._model_unk() or ""
        self.sep_token = tokens.get("sep_token") or sep or _first_in(vocab, "</s>", "[SEP]") or self.cls_token
        self.unk_token = tokens.get("unk_token") or self._model_unk() or self.sep_token
        pad = (spec.spec.get("padding") or {}).get("pad_token")
        self.pad_token = tokens.get("pad_token") or pad or _first_in(vocab, "<pad>", "[PAD]") or self.unk_token
        # None when the vocabulary has no mask token (fill-mask then has nothing to fill)
        self.mask_token = tokens.get("mask_token") or _first_in(vocab, "<mask>", "[MASK]")  # type: ignore[assignment]
        for option in ("cls_token", "sep_token", "pad_token", "unk_token"):
            if getattr(self, option) not in vocab:
                raise ValueError(f"{spec.path}: the {option} {getattr(self, option)!r} is not in the vocabulary")
        self.cls_token_id, self.sep_token_id = vocab[self.cls_token], vocab[self.sep_token]
        self.pad_token_id, self.unk_token_id = vocab[self.pad_token], vocab[self.unk_token]
        self.mask_token_id = None if self.mask_token is None else vocab.get(self.mask_token)  # type: ignore[assignment]
        self.do_lower_case = self.strip_accents = self.tokenize_chinese_chars = False  # WordPiece's options

    def _model_unk(self) -> str | None:
        if isinstance(self.model, BPE):
            return self.model.unk_token
        return None if self.model.unk_id is None else self.model.pieces[self.model.unk_id]

    def _fast_path(self, pre: Any, spec: TokenizerJson) -> Callable[[str, int], Segment] | None:
        """`_words` made fast (pipeline_fast.py) for GPT-2's pipeline (no normalizer, ByteLevel without a
        prefix space) and for a normalizer followed by a splitting Metaspace; None for the others."""
        if not isinstance(pre, dict):
            return None
        if (
            self._normalizer is None
            and isinstance(self.model, BPE)
            and pre == {**pre, "type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
        ):
            return ByteLevelWords(self.model)
        if pre.get("type") == "Metaspace":
            replacement, scheme, split = spec.metaspace("pre_tokenizer", pre)
            if split:
                model, stages = self.model, self._split_and_model
                return MetaspaceWords(self._normalizer, replacement, scheme, model, stages)
        return None

    # -- text to tokens -----------------------------------------------------------------------------------

    def normalize(self, text: str) -> tuple[str, Sequence[int]]:
        """The normalized text, and for each of its characters the index of the original character it came from."""
        normalized = self._normalized(text, 0)
        return normalized.text, [start for start, _ in normalized.spans]

    def _normalized(self, text: str, start: int) -> Normalized:
        normalized = Normalized.of(text, start)
        return normalized if self._normalizer is None else self._normalizer(normalized)

    def _words(self, text: str, start: int) -> Segment:
        """The tokens of a text between added tokens, at position `start` of the whole text: normalized,
        cut into words, each word split by the model."""
        if self._fast_words is not None:
            return self._fast_words(text, start)
        return self._stages(text, start)

    def _stages(self, text: str, start: int) -> Segment:
        """`_words` through each stage in turn."""
        return self._split_and_model(self._normalized(text, start))

    def _split_and_model(self, normalized: Normalized) -> Segment:
        """The stages after the normalizer: the pre-tokenizer's words, each split by the model."""
        words = [normalized] if self._pre_tokenizer is None else self._pre_tokenizer(normalized)
        ids, tokens, offsets, word_ids = [], [], [], []
        for w, word in enumerate(words):
            spans = word.spans
            for token_id, token, s, e in self._model_tokens[word.text]:
                ids.append(token_id)
                tokens.append(token)
                offsets.append((spans[s][0], spans[e - 1][1]))
                word_ids.append(w)
        return Segment(ids, tokens, offsets, word_ids)

    def _segment(self, text: str, name: str = "text", limit: int | None = None) -> Segment:
        """Tokens, ids, offsets and word indices of one text: added tokens cut out whole, the text between
        them tokenized. With `limit`, a long text is tokenized from a prefix holding at least `limit` tokens,
        cut where a word ends before whitespace (no stage reaches across such a cut)."""
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str, not {type(text).__name__}")
        if limit is not None and len(text) > 4 * limit + 64:
            size = 4 * limit + 64
            while size < len(text) and size <= MAX_INPUT_CHARS:
                cut = _word_end(text, size)
                if cut is None:
                    break
                segment = self._segment(text[:cut], name)
                if len(segment.ids) >= limit:
                    return segment
                size *= 4
        if len(text) > MAX_INPUT_CHARS:
            raise ValueError(
                f"{name} has {len(text)} characters; this tokenizer reads at most {MAX_INPUT_CHARS} at once "
                "(past that, only an encoding cut at its end, read from a prefix that ends before whitespace): "
                "split the text or truncate it"
            )
        parts, pos = [], 0
        # (a text holding none of the added tokens, the most common case, skips the pattern's scan)
        if self._added_pattern is not None and any(map(text.__contains__, self._added_by_group)):
            for match in self._added_pattern.finditer(text):
                content = self._added_by_group[match.lastindex - 1]  # type: ignore[operator]
                parts += [self._words(text[pos : match.start()], pos)]
                # the token is the text matched, with the whitespace it strips (as Rust keeps it)
                parts.append(Segment([self.vocab[content]], [match.group()], [match.span()], [0]))
                pos = match.end()
        parts.append(self._words(text[pos:], pos))
        return Segment.join([p for p in parts if p.ids] or [parts[-1]])

    # -- the template -------------------------------------------------------------------------------------

    def num_special_tokens(self, pair: bool) -> int:
        return self.template.count(pair)

    def _template(
        self, a: Segment, b: Segment | None, add_special_tokens: bool, overflow: tuple[bool, bool] = (False, False)
    ) -> Encoding:
        return self.template.apply(a, b, add_special_tokens, overflow)

    # -- ids back to text ---------------------------------------------------------------------------------

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        """Tokens joined by the tokenizer.json's decoder (ByteLevel: bytes back to UTF-8; Metaspace: "▁" back
        to spaces, the first one dropped)."""
        kind, settings = self._decoder
        if kind == "ByteLevel":
            table = pre_tokenizers.CHAR_BYTES
            data = b"".join(bytes([table[c]]) if c in table else c.encode() for t in tokens for c in t)
            return data.decode("utf-8", "replace")
        if kind == "Metaspace":
            replacement, first = settings["replacement"], settings["prepend_scheme"] != "never"
            return "".join(t.replace(replacement, "" if i == 0 and first else " ") for i, t in enumerate(tokens))
        return " ".join(tokens)

    def __repr__(self) -> str:
        return f"PipelineTokenizer({type(self.model).__name__}, vocab_size={self.vocab_size}, file={self.vocab_file})"


def _first_in(vocab: dict[str, int], *tokens: str) -> str | None:
    return next((t for t in tokens if t in vocab), None)


WORD_END = re.compile(f"[^{normalizers.WHITESPACE}](?=[{normalizers.WHITESPACE}])")


def _word_end(text: str, size: int) -> int | None:
    """The first position at or past `size` where whitespace follows a character that is not whitespace."""
    match = WORD_END.search(text, size - 1, MAX_INPUT_CHARS)
    return None if match is None else match.end()
