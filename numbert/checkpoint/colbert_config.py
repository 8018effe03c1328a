"""What a multi-vector (ColBERT) model directory says about turning a text into one vector per token.

A ColBERT checkpoint is a BERT-like encoder whose every token vector goes through a linear projection (128 wide
for most) and L2 normalization; queries and documents are told apart by a marker, queries are padded with [MASK]
to the length the model was trained with (query expansion), and documents may drop punctuation (a skiplist).
Two libraries save them, both as sentence-transformers directories:

- PyLate (`model_type` "ColBERT" in config_sentence_transformers.json): modules.json lists the Transformer and
  PyLate's Dense layers; the rest lies in config_sentence_transformers.json: `query_prefix` / `document_prefix`
  (a token PyLate inserts after [CLS], default "[Q] " / "[D] ", "" for none), `query_length` (default 32: queries
  are padded with [MASK] to it when `do_query_expansion`, default true), `document_length` (default 180),
  `attend_to_expansion_tokens` (default false), `skiplist_words` (default string.punctuation). Vectors are always
  normalized.
- sentence-transformers' MultiVectorEncoder (`model_type` "MultiVectorEncoder"): modules.json lists the
  Transformer, Dense layers on `token_embeddings`, a MultiVectorMask (`skiplist_words`, `skiplist_tasks`) and a
  Normalize on `token_embeddings`; sentence_bert_config.json holds `query_length`, `document_length` and
  `query_expansion` ({"strategy": "fixed" | "min", "attend", "token", "length"}); the markers are the
  `prompts` "query" and "document", texts put before the text (numbert.checkpoint.sentence_config reads them).

`read_colbert_config` reads either into one ColbertConfig (None for any other directory); numbert.pipeline's
late_interaction module runs it.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType

from ..model.config import BertConfig, clipped
from .json_file import read_object
from .sentence_config import Dense, Modules, check_dense_chain, read_dense, sentence_modules, token_level

STRATEGIES = ("fixed", "min")  # query expansion: "fixed" cuts and pads every query to its length; "min" only pads
SIMILARITIES = {"maxsim": "maxsim", "meanmaxsim": "meanmaxsim", "MaxSim": "maxsim"}  # as saved -> numbert's name
PYLATE_DEFAULTS = {"query_prefix": "[Q] ", "document_prefix": "[D] ", "query_length": 32, "document_length": 180}


@dataclass(frozen=True)
class QueryExpansion:
    """ColBERT's query expansion: every query padded with `token` to `length` tokens ([CLS] and [SEP] included)."""

    length: int
    attend: bool = False  # the encoder attends to the expansion tokens too (else they only read the query)
    token: str | None = None  # None: the tokenizer's mask token (else its end-of-sequence token)
    strategy: str = "fixed"  # "fixed": longer queries are cut to `length` too; "min": they keep up to query_length


@dataclass(frozen=True)
class ColbertConfig:
    """A multi-vector model's recipe, in numbert's terms."""

    projection: tuple[Dense, ...]  # applied in order to every token vector
    normalize: bool = True  # each token vector scaled to unit length after the projection
    query_marker: str = ""  # PyLate: a token inserted after [CLS] of every query ("" none)
    document_marker: str = ""  # ... of every document
    query_length: int | None = None  # tokens a query is cut to, markers included (None: the model's max length)
    document_length: int | None = None  # tokens a document is cut to
    expansion: QueryExpansion | None = None
    skiplist: tuple[str, ...] = ()  # tokens whose vectors are dropped (of documents, by default)
    skiplist_tasks: tuple[str, ...] = ("document",)  # "query", "document": whose tokens the skiplist drops
    similarity: str = "maxsim"  # "maxsim" (summed) or "meanmaxsim" (divided by the query's tokens)
    library: str = "sentence-transformers"  # or "PyLate": who saved the directory

    @property
    def dim(self) -> int:
        """The width of a token vector."""
        return len(self.projection[-1].weight) if self.projection else 0


def read_colbert_config(
    directory: str | Path, encoder: BertConfig | None = None, modules: Modules | EllipsisType = ...
) -> ColbertConfig | None:
    """The ColbertConfig of a PyLate or MultiVectorEncoder directory; None for any other directory. Given the
    `encoder`'s config, it is checked against it (`check_against_encoder`); given `modules` (what
    `sentence_modules` read from its modules.json), modules.json is not read again."""
    directory = Path(directory)
    colbert = _read_colbert_config(directory, sentence_modules(directory) if modules is ... else modules)
    if colbert is not None and encoder is not None:
        check_against_encoder(colbert, encoder, directory)
    return colbert


def check_against_encoder(colbert: ColbertConfig, encoder: BertConfig, directory: Path) -> None:
    """The projection reads the encoder's hidden size (each Dense the width the one before writes), and a query
    is padded to no more tokens than the encoder's positions take (PyLate's query_length, sentence-transformers'
    query_expansion.length): refused at load, naming the file and field, not at the first encode."""
    check_dense_chain(colbert.projection, encoder.hidden_size, directory / "modules.json")
    if colbert.expansion is not None and colbert.expansion.length > encoder.max_tokens:
        pylate = colbert.library == "PyLate"
        source = directory / ("config_sentence_transformers.json" if pylate else "sentence_bert_config.json")
        field = "query_length" if pylate else "query_expansion.length"
        raise ValueError(
            f"{source}: {field} is {colbert.expansion.length}; queries are padded to it, and the model takes at "
            f"most {encoder.max_tokens} tokens (its positions)"
        )


def _read_colbert_config(directory: Path, modules: Modules) -> ColbertConfig | None:
    """read_colbert_config's reading, unchecked against the encoder."""
    if modules is None:
        return None
    settings_file = directory / "config_sentence_transformers.json"
    settings = read_object(settings_file) if settings_file.is_file() else {}
    model_type = settings.get("model_type")
    pylate = model_type == "ColBERT" or any(key in settings for key in ("query_prefix", "do_query_expansion"))
    if not pylate and model_type != "MultiVectorEncoder" and not any(k == "MultiVectorMask" for _, k in modules):
        return None
    projection, normalize, mask, mask_file = [], pylate, {}, settings_file
    for path, kind in modules:
        if kind == "Dense":
            if not (pylate or token_level(directory / path)):
                raise ValueError(f"{directory / path}: a multi-vector model's Dense must work on token_embeddings")
            projection.append(read_dense(directory / path))
        elif kind == "Normalize":
            normalize = True
        elif kind == "MultiVectorMask":
            mask_file = directory / path / "config.json"
            mask = read_object(mask_file) if mask_file.is_file() else {}
        elif kind not in ("Transformer",):
            raise ValueError(
                f"{directory / 'modules.json'}: numbert does not run module {path!r} ({kind}) of a multi-vector model"
            )
    if not projection:
        raise ValueError(f"{directory / 'modules.json'}: a multi-vector model needs a Dense projection; none is listed")
    similarity = settings.get("similarity_fn_name") or "maxsim"
    if similarity not in SIMILARITIES:
        raise ValueError(f"{settings_file}: similarity_fn_name {similarity!r} is not maxsim or meanmaxsim")
    common = dict(projection=tuple(projection), normalize=normalize, similarity=SIMILARITIES[similarity])
    if pylate:
        return _pylate(settings, settings_file, common)
    transformer = directory / "sentence_bert_config.json"
    values = read_object(transformer) if transformer.is_file() else {}
    skiplist_tasks = mask.get("skiplist_tasks") or ["document"]
    return ColbertConfig(
        **common,  # type: ignore[arg-type]
        query_length=_length(values, "query_length", transformer),
        document_length=_length(values, "document_length", transformer),
        expansion=_expansion(values.get("query_expansion"), transformer),
        skiplist=_words(mask.get("skiplist_words") or [], mask_file),
        skiplist_tasks=tuple([skiplist_tasks] if isinstance(skiplist_tasks, str) else skiplist_tasks),
    )


def _pylate(settings: dict, source: Path, common: dict) -> ColbertConfig:
    """PyLate's keys, with PyLate's defaults for those it did not save."""
    values: dict = {key: settings.get(key) for key in PYLATE_DEFAULTS}
    values = {key: PYLATE_DEFAULTS[key] if value is None else value for key, value in values.items()}
    for key in ("query_prefix", "document_prefix"):
        if not isinstance(values[key], str):
            raise ValueError(f"{source}: {key} must be a string (a token), got {values[key]!r}")
    query_length = _length(values, "query_length", source)
    expand = _boolean(settings, "do_query_expansion", source)
    attend = _boolean(settings, "attend_to_expansion_tokens", source)
    skiplist = settings.get("skiplist_words")
    expansion = None
    if expand is None or expand:
        assert query_length is not None  # PyLate's default
        expansion = QueryExpansion(query_length, attend=bool(attend))
    return ColbertConfig(
        **common,
        query_marker=values["query_prefix"],
        document_marker=values["document_prefix"],
        query_length=query_length,
        document_length=_length(values, "document_length", source),
        expansion=expansion,
        skiplist=_words(list(string.punctuation) if skiplist is None else skiplist, source),
        library="PyLate",
    )


def _boolean(settings: dict, key: str, source: Path) -> bool | None:
    """A JSON boolean field (None when absent or null): "no", 0 or "false" are refused, naming the file and field."""
    value = settings.get(key)
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"{source}: {key} must be true or false (a JSON boolean), got {clipped(value)}")
    return value


def _length(values: dict, key: str, source: Path) -> int | None:
    value = values.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 2):
        raise ValueError(f"{source}: {key} must be an integer >= 2, got {clipped(value)}")
    return value


def _expansion(value, source: Path) -> QueryExpansion | None:
    """sentence-transformers' query_expansion dict, checked."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("strategy") not in STRATEGIES:
        raise ValueError(
            f"{source}: query_expansion must be an object with strategy 'fixed' or 'min', got {clipped(value)}"
        )
    length, attend, token = value.get("length"), value.get("attend", False), value.get("token")
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"{source}: query_expansion.length must be a positive integer, got {clipped(length)}")
    if not isinstance(attend, bool) or not (token is None or isinstance(token, str)):
        raise ValueError(f"{source}: query_expansion.attend must be true or false and token a string or null")
    return QueryExpansion(length, attend, token, value["strategy"])


def _words(words, source: Path) -> tuple[str, ...]:
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ValueError(f"{source}: skiplist_words must be a list of strings, got {words!r:.80}")
    return tuple(words)
