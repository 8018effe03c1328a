"""The one reader of a Hugging Face `tokenizer.json`: the Rust `tokenizers` library's pipeline, read component by
component into numbert's stages. A component numbert does not implement is refused when the file is read,
naming the file and the field and listing what is supported.

    added_tokens    added_tokens.py: cut out of the raw text whole (with lstrip / rstrip whitespace)
    normalizer      normalizers.py (BertNormalizer; NFKC, Lowercase, Strip, Replace, Precompiled, Sequence, ...)
    pre_tokenizer   pre_tokenizers.py (BertPreTokenizer; ByteLevel, Metaspace, WhitespaceSplit, Split, Digits, ...)
    model           models.py: WordPiece, BPE (bpe.py), Unigram (unigram.py)
    post_processor  templates.py (BertProcessing, RobertaProcessing, TemplateProcessing, ByteLevel, Sequence)
    decoder         decoders.py (WordPiece, ByteLevel, Metaspace; Replace, ByteFallback, Fuse, Strip, Sequence)

A WordPiece file is read only when its stages are exactly BERT's (wordpiece_json.py: BertNormalizer with
clean_text, BertPreTokenizer, "##" pieces, BERT's template or another frame templates.py reads, as MPNet's);
BPE and Unigram files (`read_stages`) may combine the other normalizers and pre-tokenizers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checkpoint.json_file import read_object
from .added_tokens import AddedToken
from .bpe import BPE
from .decoders import (
    ByteFallbackDecoder,
    ByteLevelDecoder,
    Decoder,
    FuseDecoder,
    MetaspaceDecoder,
    ReplaceDecoder,
    SequenceDecoder,
    SpaceDecoder,
    StripDecoder,
)
from .encoding import Segment
from .models import Model, WordLevel
from .normalizers import (
    Lowercase,
    Normalizer,
    NormalizerSequence,
    Precompiled,
    Replace,
    Strip,
    UnicodeForm,
    pattern_kind,
)
from .patterns import Pattern, Unreadable
from .pre_tokenizers import (
    BEHAVIORS,
    ByteLevel,
    Digits,
    Metaspace,
    PreTokenizer,
    PreTokenizerSequence,
    Split,
    WhitespaceSplit,
)
from .precompiled import CharsMap
from .templates import Template
from .unigram import Unigram

SUPPORTED = {  # of BPE and Unigram files; a WordPiece file has BERT's stages
    "model": ("BPE", "Unigram", "WordLevel", "WordPiece"),
    "normalizer": ("Sequence", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Strip", "Replace", "Precompiled"),
    "pre_tokenizer": ("Sequence", "ByteLevel", "Metaspace", "WhitespaceSplit", "Split", "Digits"),
    "decoder": ("ByteLevel", "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip", "Sequence"),
    "post_processor": ("RobertaProcessing", "TemplateProcessing", "BertProcessing", "ByteLevel", "Sequence"),
}


MAX_ID = 2**32 - 1  # token and type ids are the Rust library's u32: it refuses a file with a larger or negative one
MAX_DEPTH = 128  # arrays and objects nested deeper are refused (the Rust library's JSON reader stops at 128)


def shown(value: Any, limit: int = 100) -> str:
    """`value` as JSON, cut to `limit` characters, for an error message (whatever it holds)."""
    try:
        return json.dumps(value)[:limit]
    except (RecursionError, ValueError, TypeError):
        return "(a value nested too deeply to show)"


class TokenizerJson:
    """A tokenizer.json's contents, read part by part; errors name the file and the field."""

    def __init__(self, path: str | os.PathLike, contents: dict | None = None):
        self.path = Path(path)
        self.spec = read_object(self.path) if contents is None else contents
        for name in ("normalizer", "pre_tokenizer", "post_processor", "decoder", "added_tokens"):
            self.check_depth(name, self.spec.get(name))  # (read recursively: a Sequence of Sequences of ...)

    def model_type(self) -> str:
        """The model's type, refused unless one numbert implements."""
        return self.component("model", self.spec.get("model"), "model")[0]

    # -- errors -------------------------------------------------------------------------------------------

    def error(self, field: str, message: str) -> ValueError:
        return ValueError(f"{self.path}: {field} {message}")

    def refuse(self, field: str, value: Any, expected: str) -> ValueError:
        """A WordPiece file's field that is not BERT's."""
        return ValueError(
            f"{self.path}: {field} is {shown(value, 200)}, not {expected}; numbert runs BERT's WordPiece tokenizer only"
        )

    def unsupported(self, field: str, kind: Any, section: str) -> ValueError:
        return self.error(
            field,
            f"is {shown(kind, 100)}, which numbert does not implement; it supports {section}s of type "
            + ", ".join(SUPPORTED[section]),
        )

    # -- fields -------------------------------------------------------------------------------------------

    def component(self, field: str, value: Any, section: str) -> tuple[str, dict]:
        """(type, settings) of a pipeline component, refused unless an object of a supported type."""
        if not isinstance(value, dict):
            raise self.error(field, f"must be an object with a 'type', not {shown(value, 100)}")
        if value.get("type") not in SUPPORTED[section]:
            raise self.unsupported(f"{field}.type", value.get("type"), section)
        return value["type"], value

    def token_id(self, field: str, value: Any) -> int:
        """A token or type id: an integer from 0 to MAX_ID, as the Rust library reads it."""
        if type(value) is not int or not 0 <= value <= MAX_ID:
            raise self.error(field, f"is {shown(value, 100)}, not an id (an integer from 0 to {MAX_ID})")
        return value

    def check_depth(self, field: str, value: Any) -> None:
        """Refuse `value` when it nests arrays and objects deeper than MAX_DEPTH (walked level by level)."""
        level, depth = [value], 0
        while level:
            depth += 1
            if depth > MAX_DEPTH:
                raise self.error(field, f"nests arrays and objects more than {MAX_DEPTH} deep")
            level = [
                v
                for item in level
                if isinstance(item, (list, dict))
                for v in (item.values() if isinstance(item, dict) else item)
            ]

    def flag(self, field: str, value: Any, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(field, f"must be true or false, not {shown(value, 100)}")
        return value

    def pattern(self, field: str, value: Any) -> tuple[Pattern, Any]:
        """A {"String": s} or {"Regex": r} pattern (Oniguruma's dialect, read by patterns.py), and what its matches
        hold (normalizers.pattern_kind)."""
        for key, literal in (("String", True), ("Regex", False)):
            if isinstance(value, dict) and isinstance(value.get(key), str):
                try:
                    pattern = Pattern(value[key], literal, f"{self.path}: {field}")
                except Unreadable as e:
                    raise self.error(
                        field, f"holds a regular expression numbert cannot read as Oniguruma does ({e})"
                    ) from None
                return pattern, pattern_kind(value[key], literal=literal)
        raise self.error(field, f'must be {{"String": ...}} or {{"Regex": ...}}, not {shown(value, 100)}')

    def section(self, name: str) -> dict:
        """A part of a WordPiece file's pipeline: an object, or {} when it is absent or null."""
        value = self.spec.get(name)
        if value is not None and not isinstance(value, dict):
            raise self.refuse(name, value, "an object")
        return value or {}

    def setting(self, name: str, field: str, kind: type, default: Any, expected: str) -> Any:
        """Field `field` of section `name` (`default` when absent), refused unless a `kind` (a bool is no int)."""
        value = self.section(name).get(field, default)
        if value is not default and not (isinstance(value, kind) and isinstance(value, bool) == (kind is bool)):
            raise self.refuse(f"{name}.{field}", value, expected)
        return value

    # -- the stages of BPE and Unigram files --------------------------------------------------------------

    def normalizer(self, value: Any, field: str = "normalizer") -> Normalizer | None:
        if value is None:
            return None
        kind, spec = self.component(field, value, "normalizer")
        if kind == "Sequence":
            steps = spec.get("normalizers")
            if not isinstance(steps, list):
                raise self.error(f"{field}.normalizers", "must be a list")
            return NormalizerSequence([self.normalizer(s, f"{field}.normalizers[{i}]") for i, s in enumerate(steps)])  # type: ignore[misc]
        if kind in ("NFC", "NFD", "NFKC", "NFKD"):
            return UnicodeForm(kind)  # type: ignore[arg-type]
        if kind == "Lowercase":
            return Lowercase()
        if kind == "Strip":
            return Strip(
                self.flag(f"{field}.strip_left", spec.get("strip_left"), True),
                self.flag(f"{field}.strip_right", spec.get("strip_right"), True),
            )
        if kind == "Replace":
            if not isinstance(spec.get("content"), str):
                raise self.error(f"{field}.content", "must be a string")
            pattern, kind_of_matches = self.pattern(f"{field}.pattern", spec.get("pattern"))
            return Replace(pattern, spec["content"], kind_of_matches)
        charsmap = spec.get("precompiled_charsmap")
        if not isinstance(charsmap, str):
            raise self.error(f"{field}.precompiled_charsmap", "must be a base64 string")
        try:
            return Precompiled(CharsMap(charsmap))
        except (ValueError, IndexError) as e:
            raise self.error(f"{field}.precompiled_charsmap", f"is not a SentencePiece charsmap ({e})") from None

    def pre_tokenizer(self, value: Any, field: str = "pre_tokenizer") -> PreTokenizer | None:
        if value is None:
            return None
        kind, spec = self.component(field, value, "pre_tokenizer")
        if kind == "Sequence":
            steps = spec.get("pretokenizers")
            if not isinstance(steps, list):
                raise self.error(f"{field}.pretokenizers", "must be a list")
            return PreTokenizerSequence(
                [self.pre_tokenizer(s, f"{field}.pretokenizers[{i}]") for i, s in enumerate(steps)]  # type: ignore[misc]
            )
        if kind == "ByteLevel":
            return ByteLevel(
                self.flag(f"{field}.add_prefix_space", spec.get("add_prefix_space"), True),
                self.flag(f"{field}.use_regex", spec.get("use_regex"), True),
            )
        if kind == "Metaspace":
            return Metaspace(*self.metaspace(field, spec))
        if kind == "WhitespaceSplit":
            return WhitespaceSplit()
        if kind == "Digits":
            return Digits(self.flag(f"{field}.individual_digits", spec.get("individual_digits"), False))
        behavior = spec.get("behavior")
        if behavior not in BEHAVIORS:
            raise self.error(f"{field}.behavior", f"must be one of {', '.join(BEHAVIORS)}")
        invert = self.flag(f"{field}.invert", spec.get("invert"), False)
        pattern, kind_of_matches = self.pattern(f"{field}.pattern", spec.get("pattern"))
        return Split(pattern, behavior, kind_of_matches, invert)

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

    def vocabulary(self, vocab: Any) -> dict[str, int]:
        """model.vocab of a BPE, WordLevel or WordPiece file: each token's id (MAX_ID at most, as in Rust)."""
        if not isinstance(vocab, dict):
            raise self.error("model.vocab", "must map each token to its integer id")
        for token, i in vocab.items():
            if type(i) is not int or not 0 <= i <= MAX_ID:
                self.token_id(f"model.vocab[{shown(token, 60)}]", i)
        return vocab

    def model(self) -> tuple[Model, dict[str, int]]:
        """The BPE, Unigram or WordLevel model and its vocabulary (token -> id)."""
        kind, spec = self.component("model", self.spec.get("model"), "model")
        source = str(self.path)
        if kind == "WordLevel":
            if not isinstance(spec.get("unk_token"), str):  # (Rust requires the field)
                raise self.error("model.unk_token", f"must be a string, not {shown(spec.get('unk_token'))}")
            vocab = self.vocabulary(spec.get("vocab"))
            return WordLevel(vocab, spec["unk_token"]), dict(vocab)
        if kind == "BPE":
            for name in ("continuing_subword_prefix", "end_of_word_suffix"):
                if spec.get(name) not in (None, ""):  # "" (as transformers saves RoBERTa's) adds nothing: none
                    raise self.error(f"model.{name}", f"is {shown(spec[name])}, which numbert does not implement")
            dropout = spec.get("dropout")  # BPE-dropout, a training device: numbert tokenizes without it (docs)
            if dropout is not None and (type(dropout) not in (int, float) or not 0 <= dropout <= 1):
                raise self.error("model.dropout", f"is {shown(dropout)}, not a probability from 0 to 1")
            vocab = self.vocabulary(spec.get("vocab"))
            merges = spec.get("merges")
            if not isinstance(merges, list):
                raise self.error("model.merges", "must be a list")
            pairs = []
            for i, merge in enumerate(merges):  # "left right" (older files) or [left, right]
                pair = merge.split(" ") if isinstance(merge, str) else merge
                if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
                    raise self.error(f"model.merges[{i}]", f"must be two tokens, not {shown(merge, 100)}")
                pairs.append((pair[0], pair[1]))
            return BPE(
                vocab,
                pairs,
                unk_token=spec.get("unk_token"),
                fuse_unk=self.flag("model.fuse_unk", spec.get("fuse_unk"), False),
                byte_fallback=self.flag("model.byte_fallback", spec.get("byte_fallback"), False),
                ignore_merges=self.flag("model.ignore_merges", spec.get("ignore_merges"), False),
                source=source,
            ), dict(vocab)
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
                raise self.error(f"model.vocab[{i}]", f"must be [piece, score], not {shown(item, 100)}")
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

    def added_tokens(self, vocab: dict[str, int]) -> list[AddedToken]:
        """The added tokens: content, id (which must agree with the vocabulary; added to it when it lacks the
        token), special, lstrip, rstrip."""
        tokens = self.spec.get("added_tokens") or []
        if not isinstance(tokens, list):
            raise self.error("added_tokens", "must be a list")
        out = []
        for i, token in enumerate(tokens):
            field = f"added_tokens[{i}]"
            if not (isinstance(token, dict) and isinstance(token.get("content"), str) and type(token.get("id")) is int):
                raise self.error(field, 'must be {"content": a string, "id": an integer, ...}')
            self.token_id(f"{field}.id", token["id"])
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
                AddedToken(
                    token["content"],
                    token["id"],
                    special=self.flag(f"{field}.special", token.get("special"), False),
                    lstrip=self.flag(f"{field}.lstrip", token.get("lstrip"), False),
                    rstrip=self.flag(f"{field}.rstrip", token.get("rstrip"), False),
                )
            )
        return out

    def decoder(self, value: Any = None, field: str = "decoder") -> Decoder:
        """The decoder at `field` (the file's own by default; none: tokens joined by spaces)."""
        if field == "decoder":
            value = self.spec.get("decoder")
            if value is None:
                return SpaceDecoder()
        kind, spec = self.component(field, value, "decoder")
        if kind == "Metaspace":
            replacement, scheme, _ = self.metaspace(field, spec)
            return MetaspaceDecoder(replacement, scheme)
        if kind == "Replace":
            content = spec.get("content")
            if not isinstance(content, str):
                raise self.error(f"{field}.content", f"must be a string, not {shown(content, 100)}")
            return ReplaceDecoder(self.pattern(f"{field}.pattern", spec.get("pattern"))[0], content)
        if kind == "Strip":
            content = spec.get("content")
            if not (isinstance(content, str) and len(content) == 1):
                raise self.error(f"{field}.content", "must be one character")
            counts = [self.token_id(f"{field}.{name}", spec.get(name)) for name in ("start", "stop")]  # Rust's usize
            return StripDecoder(content, counts[0], counts[1])
        if kind == "Sequence":
            steps = spec.get("decoders")
            if not isinstance(steps, list):
                raise self.error(f"{field}.decoders", "must be a list")
            return SequenceDecoder([self.decoder(s, f"{field}.decoders[{i}]") for i, s in enumerate(steps)])
        return {"ByteFallback": ByteFallbackDecoder, "Fuse": FuseDecoder}.get(kind, ByteLevelDecoder)()

    # -- the post-processor ------------------------------------------------------------------------------

    def post_processor(self, vocab: dict[str, int]) -> Template:
        """The template of the post_processor (none: A, then B, type ids 0)."""
        value = self.spec.get("post_processor")
        if value is None:
            return Template([("A", 0)], [("A", 0), ("B", 1)])
        return self._template(value, "post_processor", vocab)

    def _special(self, field: str, tokens: list[str], ids: list[int], vocab: dict[str, int]) -> Segment:
        """The special tokens `tokens` with their `ids`, which must be the vocabulary's (none at all: Rust adds
        nothing for them)."""
        if len(tokens) != len(ids) or not all(isinstance(t, str) for t in tokens):
            raise self.error(
                field, f"must pair each of its ids with a token (string), not {shown(ids)} and {shown(tokens)}"
            )
        for i, token_id in enumerate(ids):
            self.token_id(f"{field}.ids[{i}]", token_id)
        for token, token_id in zip(tokens, ids):
            if vocab.get(token) != token_id:
                raise self.error(field, f"names {token!r} with id {token_id}, which the vocabulary does not give it")
        return Segment(list(ids), list(tokens), [(0, 0)] * len(ids), [None] * len(ids))

    def _pair_token(self, field: str, value: Any, vocab: dict[str, int]) -> Segment:
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
            raise self.error(field, f"must be [token, id], not {shown(value, 100)}")
        return self._special(field, [value[0]], [self.token_id(f"{field}[1]", value[1])], vocab)

    def _template(self, value: Any, field: str, vocab: dict[str, int]) -> Template:
        if not isinstance(value, dict) or value.get("type") not in SUPPORTED["post_processor"]:
            kind = value.get("type") if isinstance(value, dict) else value
            raise self.unsupported(f"{field}.type", kind, "post_processor")
        kind = value["type"]
        if kind in ("RobertaProcessing", "BertProcessing"):
            cls = self._pair_token(f"{field}.cls", value.get("cls"), vocab)
            sep = self._pair_token(f"{field}.sep", value.get("sep"), vocab)
            if kind == "BertProcessing":
                return Template.bert(cls, sep)
            return Template(
                [(cls, 0), ("A", 0), (sep, 0)],
                [(cls, 0), ("A", 0), (sep, 0), (sep, 0), ("B", 0), (sep, 0)],
                trim_offsets=self.flag(f"{field}.trim_offsets", value.get("trim_offsets"), True),
                add_prefix_space=self.flag(f"{field}.add_prefix_space", value.get("add_prefix_space"), True),
                named=(cls.tokens[0], sep.tokens[0]),
                own_types_in_further_windows=(False, True),
            )
        if kind == "ByteLevel":
            return Template(
                [("A", 0)],
                [("A", 0), ("B", 1)],
                trim_offsets=self.flag(f"{field}.trim_offsets", value.get("trim_offsets"), True),
                add_prefix_space=self.flag(f"{field}.add_prefix_space", value.get("add_prefix_space"), True),
            )
        if kind == "Sequence":
            return _sequence_template(self, value, field, vocab)
        return _processing_template(self, value, field, vocab)


# -- the post-processor's templates ----------------------------------------------------------------------------


def _sequence_template(spec: TokenizerJson, value: dict, field: str, vocab: dict[str, int]) -> Template:
    """A Sequence post-processor: at most one of its steps adds special tokens; the others may trim offsets."""
    steps = value.get("processors")
    if not isinstance(steps, list) or not steps:
        raise spec.error(f"{field}.processors", "must be a non-empty list")
    templates = [spec._template(s, f"{field}.processors[{i}]", vocab) for i, s in enumerate(steps)]
    framing = [t for t in templates if t.count(True)] or templates[-1:]
    if len(framing) > 1:
        raise spec.error(field, "adds special tokens in more than one step, which numbert does not implement")
    trimming = [t for t in templates if t.trim_offsets]
    return Template(
        framing[0].single,
        framing[0].pair,
        trim_offsets=bool(trimming),
        add_prefix_space=bool(trimming) and trimming[0].add_prefix_space,
        named=framing[0].named,
        own_types_in_further_windows=framing[0].own_types_in_further_windows,
    )


def _processing_template(spec: TokenizerJson, value: dict, field: str, vocab: dict[str, int]) -> Template:
    """A TemplateProcessing post-processor: its single and pair templates, and the tokens framing a text."""
    specials = value.get("special_tokens") or {}
    if not isinstance(specials, dict):
        raise spec.error(f"{field}.special_tokens", "must be an object")
    single = _template_items(spec, value, field, "single", specials, vocab)
    pair = _template_items(spec, value, field, "pair", specials, vocab)
    a: int = (
        next(i for i, (item, _) in enumerate(single) if item == "A") if any(item == "A" for item, _ in single) else 0
    )
    before = [item.tokens[0] for item, _ in single[:a] if isinstance(item, Segment) and item.tokens]
    after = [item.tokens[0] for item, _ in single[a + 1 :] if isinstance(item, Segment) and item.tokens]
    named = (
        before[0] if before else (after[0] if after else ""),
        after[0] if after else (before[0] if before else ""),
    )
    return Template(single, pair, named=named, own_types_in_further_windows=(True, True))


def _template_items(
    spec: TokenizerJson, value: dict, field: str, name: str, specials: dict, vocab: dict[str, int]
) -> list[tuple[Segment | str, int]]:
    """The pieces of one of a TemplateProcessing's templates (`name`: single or pair), each with its type id."""
    template = value.get(name)
    if not isinstance(template, list):
        raise spec.error(f"{field}.{name}", "must be a list")
    out: list[tuple[Segment | str, int]] = []
    for i, item in enumerate(template):
        where = f"{field}.{name}[{i}]"
        ((kind, piece),) = item.items() if isinstance(item, dict) and len(item) == 1 else [(None, None)]
        if not isinstance(piece, dict):
            raise spec.error(where, f"must be a Sequence or a SpecialToken, not {shown(item, 100)}")
        spec.token_id(f"{where}.type_id", piece.get("type_id", 0))
        if kind == "Sequence" and piece.get("id") in ("A", "B"):
            out.append((piece["id"], piece.get("type_id", 0)))
        elif kind == "SpecialToken" and isinstance(piece.get("id"), str) and piece["id"] in specials:
            entry = specials[piece["id"]]
            if not (
                isinstance(entry, dict) and isinstance(entry.get("ids"), list) and isinstance(entry.get("tokens"), list)
            ):
                raise spec.error(f"{field}.special_tokens.{piece['id']}", "must hold ids and tokens")
            special = spec._special(f"{field}.special_tokens.{piece['id']}", entry["tokens"], entry["ids"], vocab)
            out.append((special, piece.get("type_id", 0)))
        else:
            raise spec.error(
                where, "must be Sequence A/B or a SpecialToken listed in special_tokens, not " + shown(item, 100)
            )
    return out


@dataclass
class JsonStages:
    """The stages of a BPE or Unigram tokenizer.json, and the tokens it names."""

    model: Model
    vocab: dict[str, int]  # the model's, with the added tokens
    normalizer: Normalizer | None
    pre_tokenizer: PreTokenizer | None
    post_processor: Template
    decoder: Decoder
    added_tokens: list[AddedToken]
    pad_token: str | None  # the padding section's


def read_stages(spec: TokenizerJson) -> JsonStages:
    """Every stage of a BPE or Unigram tokenizer.json."""
    model, vocab = spec.model()
    added = spec.added_tokens(vocab)
    padding = spec.spec.get("padding")
    return JsonStages(
        model,
        vocab,
        spec.normalizer(spec.spec.get("normalizer")),
        spec.pre_tokenizer(spec.spec.get("pre_tokenizer")),
        spec.post_processor(vocab),
        spec.decoder(),
        added,
        padding.get("pad_token") if isinstance(padding, dict) else None,
    )
