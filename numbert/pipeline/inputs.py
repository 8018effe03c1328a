"""Inputs: text -> rows. Tokenizing as a model reads its inputs: a text, a pair, a cross-encoder's (query,
document), token ids given as they are, a multi-vector model's query or document; each cut to its length or refused
naming its index (InputTooLong, TooManyTokens, InvalidTokenId), so each engine names the input in its own words (a
server's 413 names the request's field). Counting and cutting a long text is the tokenizer's: it tokenizes only as
much of a text as decides the answer. A corpus's texts become planned batches here too (`plan`).

    inputs = pipeline.inputs
    rows = inputs.rows(texts, pipeline.recipe(), truncate=True)       # a row per text, as a server queues them
    for positions, encodings in inputs.plan(texts, None, recipe, 32): ...   # a corpus, batch by batch
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from ..checkpoint.colbert_config import ColbertConfig
from ..checkpoint.m3_heads import M3Heads
from ..checkpoint.sentence_config import SentenceConfig
from ..model.config import BertConfig
from ..tokenizer import Encoding, Tokenizer
from . import planner
from .pair_prompt import PairPrompt
from .planner import Row, row_of, text_list
from .recipe import Recipe, check_long, tokens_per_input


class InputTooLong(ValueError):
    """Input `index` holds more tokens than `limit` (`tokens` of them, or at least that many if not `exact`)."""

    def __init__(self, index: int, tokens: int, limit: int, exact: bool = True):
        self.index, self.tokens, self.limit, self.exact = index, tokens, limit, exact
        count = str(tokens) if exact else f"at least {tokens}"
        super().__init__(f"input {index} is {count} tokens long; the model takes at most {limit}")


class TooManyTokens(ValueError):
    """The inputs up to input `index` hold `tokens` tokens in all, more than the `limit` of one call."""

    def __init__(self, index: int, tokens: int, limit: int):
        self.index, self.tokens, self.limit = index, tokens, limit
        super().__init__(f"the inputs up to input {index} are {tokens} tokens; at most {limit} are taken at once")


class InvalidTokenId(ValueError):
    """Token `position` of input `index` is `value`, not an id of the vocabulary [0, `vocab_size`)."""

    def __init__(self, index: int, position: int, value: int, vocab_size: int):
        self.index, self.position, self.value, self.vocab_size = index, position, value, vocab_size
        super().__init__(f"token {position} of input {index} is {value}, not an id of the vocabulary [0, {vocab_size})")


class NotAPair(ValueError):
    """Input `index` is one text, where the model (a decoder reranker) scores (query, document) pairs only."""

    def __init__(self, index: int, model: str | None):
        self.index = index
        super().__init__(f"input {index} is one text; {model} scores (query, document) pairs only")


class InputParts(Protocol):
    """What inputs are read by: the model's tokenizer and the recipes its directory names (a Pipeline's
    attributes, read at each call, so a recipe set later counts)."""

    name: str | None
    tokenizer: Tokenizer | None
    sentence_config: SentenceConfig | None
    colbert: ColbertConfig | None
    m3: M3Heads | None
    pair_prompt: PairPrompt | None

    @property
    def config(self) -> BertConfig: ...


def multi_vector_kind(parts: InputParts) -> ColbertConfig | M3Heads:
    """The ColBERT recipe or BGE-M3's heads, or a ValueError saying the model has neither."""
    found = parts.colbert if parts.colbert is not None else parts.m3
    if found is None:
        raise ValueError(
            f"{parts.name} is not a multi-vector model: it has neither a ColBERT recipe (a PyLate or "
            f"sentence-transformers MultiVectorEncoder directory) nor BGE-M3's colbert_linear.pt"
        )
    return found


class Inputs:
    """Text -> rows of token ids, within the model's lengths; each input too long or out of the vocabulary refused
    naming its index."""

    def __init__(self, parts: InputParts):
        self.parts = parts

    def require_tokenizer(self) -> Tokenizer:
        """The tokenizer, or a ValueError saying the model has none."""
        tokenizer = self.parts.tokenizer
        if tokenizer is None:
            name = self.parts.name
            raise ValueError(
                f"model {name!r} has no vocab.txt (nor tokenizer.json), so it can only run on token ids (forward)"
            )
        return tokenizer

    def encodings(
        self,
        text: str | list[str],
        text_pair: str | list[str] | None,
        *,
        max_length: int | None,
        truncation: bool | str,
        long: str = "truncate",
        attentions: bool = False,
    ) -> list[Encoding]:
        """The encodings of one text (or pair) or a list of them, as `Pipeline.__call__` runs them: cut to
        `max_length` (default: the model's positions) unless `truncation` is False; with long="window", one text's
        every token (no pair, no attentions: a ValueError otherwise)."""
        tokenizer = self.require_tokenizer()
        limit = self.parts.config.max_tokens
        whole = isinstance(max_length, int) and not isinstance(max_length, bool)
        if max_length is not None and not (whole and 1 <= max_length <= limit):
            raise ValueError(f"max_length must be an integer between 1 and {limit}, got {max_length!r:.40}")
        check_long(long)
        if not isinstance(text, str):
            text = text_list(text, name="text")
            if text_pair is not None:
                text_pair = text_list(text_pair, name="text_pair")
        elif text_pair is not None and not isinstance(text_pair, str):
            raise TypeError(f"text is one str, so text_pair must be one str too, not {type(text_pair).__name__}")
        if long == "window":
            if not isinstance(text, str) or text_pair is not None or attentions:
                raise ValueError(
                    "long='window' runs one text without a pair or attentions; "
                    "for many texts use model.embed(texts, long='window')"
                )
            return [tokenizer.encode(text, max_length=None, truncation=False)]
        cut_at = (max_length or limit) if truncation else None
        if isinstance(text, str):
            assert text_pair is None or isinstance(text_pair, str)  # checked above
            return [tokenizer.encode(text, text_pair, max_length=cut_at, truncation=truncation)]
        if not text:
            return []
        return tokenizer.encode_batch(text, text_pair, max_length=cut_at, truncation=truncation).encodings

    def window_size(self, max_length: int | None) -> int:
        """Tokens per window: `max_length`, else a sentence-transformers max_seq_length, else the model's positions;
        a ValueError for a tokenizer that does not frame a text with one special token at each end, as [CLS] text
        [SEP], <s> text </s> and <bos> text <eos> (each window repeats those two around its part of the text)."""
        tokenizer = self.parts.tokenizer
        framing = 2 if tokenizer is None else tokenizer.num_special_tokens(False)
        if framing != 2:
            raise ValueError(
                f"long='window' runs a long text as windows framed as the text is, by one special token at each end; "
                f"{self.parts.name}'s tokenizer adds {framing} to a text (Qwen3's: <|endoftext|> after it alone): "
                "use long='truncate' (this model reads up to "
                f"{tokens_per_input(self.parts.config, self.parts.sentence_config, None):,} tokens)"
            )
        return tokens_per_input(self.parts.config, self.parts.sentence_config, max_length)

    def tokenize(self, texts: Sequence[str], recipe: Recipe, *, special: bool, max_tokens: int) -> list[Encoding]:
        """Each text's tokens (lowercased first if the recipe says so, no prompt), offsets into the text: at most
        the recipe's max_length tokens an input (InputTooLong beyond), `max_tokens` in all (TooManyTokens naming the
        input that passes it, with the running total)."""
        encodings, total = [], 0
        for i, text in enumerate(texts):
            prepared = text.lower() if recipe.lowercase else text
            encoding = self.bounded(i, prepared, None, recipe.max_length, truncate=False, side="right", special=special)
            total += len(encoding)
            if total > max_tokens:
                raise TooManyTokens(i, total, max_tokens)
            encodings.append(encoding)
        return encodings

    def decode(self, inputs: Sequence[Sequence[int]], skip_special_tokens: bool) -> list[str]:
        """Each list of token ids as text (the tokenizer's decoder); InvalidTokenId for an id outside the vocabulary."""
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise TypeError(f"decode takes lists of token ids, not {type(inputs).__name__}")
        for i, ids in enumerate(inputs):
            if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
                raise TypeError(f"input {i} must be a list of token ids, not {type(ids).__name__}")
            self.check_ids(i, ids)
        tokenizer = self.require_tokenizer()
        return [tokenizer.decode(ids, skip_special_tokens=skip_special_tokens) for ids in inputs]

    def bounded(
        self, index: int, text: str, pair: str | None, limit: int, *, truncate: bool, side: str, special: bool = True
    ) -> Encoding:
        """A prepared text's (or pair's) tokens, at most `limit` with the special tokens counted: cut there (on
        `side`) if `truncate`, else InputTooLong(index). The tokenizer reads only as much of a long text as
        decides that: `limit` tokens, or one more to learn that the text is too long."""
        tokenizer = self.require_tokenizer()
        extra = 0 if special else tokenizer.num_special_tokens(pair is not None)
        cut = limit - extra + (0 if truncate else 1)
        encoding = tokenizer.encode(
            text, pair, add_special_tokens=special, max_length=cut, truncation=True, truncation_side=side
        )
        if len(encoding) + extra > limit:
            raise InputTooLong(index, len(encoding) + extra, limit, exact=False)
        return encoding

    def rows(self, texts: Sequence[str], recipe: Recipe, *, truncate: bool, side: str | None = None) -> list[Row]:
        """A row per text as `recipe` prepares it (its prompt, lowercasing), within its max_length: cut (on `side`,
        default the recipe's) if `truncate`, else InputTooLong naming the first text too long."""
        side = side or recipe.truncation_side
        return [
            row_of(self.bounded(i, recipe.prepare(text), None, recipe.max_length, truncate=truncate, side=side))
            for i, text in enumerate(texts)
        ]

    def pair_rows(
        self, firsts: Sequence[str], seconds: Sequence[str | None], *, truncate: bool, side: str | None = None
    ) -> list[Row]:
        """A row per input of a cross-encoder, one text or a (query, document) pair, as numbert.pipeline.reranking
        tokenizes it: within pair_limit tokens, cut by longest_first (on `side`, default the tokenizer's) if
        `truncate`, else InputTooLong naming the first input too long. A decoder reranker's pair: `prompt_rows`."""
        if self.parts.pair_prompt is not None:
            single = next((i for i, b in enumerate(seconds) if b is None), None)
            if single is not None:
                raise NotAPair(single, self.parts.name)
            pairs = [(a, b) for a, b in zip(firsts, seconds) if b is not None]  # each a pair (checked)
            return self.prompt_rows(pairs, "", self.pair_limit(), truncate=truncate)
        limit, prepare = self.pair_limit(), self.segment
        side = side or self.require_tokenizer().truncation_side
        return [
            row_of(self.bounded(i, prepare(a), None if b is None else prepare(b), limit, truncate=truncate, side=side))
            for i, (a, b) in enumerate(zip(firsts, seconds))
        ]

    def prompt_rows(
        self, pairs: Sequence[tuple[str, str]], instruction: str, limit: int, *, truncate: bool = True
    ) -> list[Row]:
        """A decoder reranker's row of each pair (numbert.pipeline.pair_prompt): its prompt with `instruction`
        ("": the template's default), cut at the end to `limit` tokens with the template's tail written back, if
        `truncate`, else InputTooLong naming the first pair too long."""
        pair_prompt, tokenizer = self.parts.pair_prompt, self.require_tokenizer()
        assert pair_prompt is not None  # the callers ask a decoder reranker only
        rows = []
        for i, pair in enumerate(pairs):
            row, longer = pair_prompt.row(tokenizer, pair, instruction, limit)
            if longer and not truncate:
                raise InputTooLong(i, limit + 1, limit, exact=False)
            rows.append(row)
        return rows

    def id_rows(self, inputs: Sequence[Sequence[int]], limit: int) -> list[Row]:
        """Token-id inputs used as given ([CLS] and [SEP] included, as tokenize gives them): InvalidTokenId for
        an id outside the vocabulary, InputTooLong for an input over `limit` (ids are never cut)."""
        rows = []
        for i, ids in enumerate(inputs):
            if len(ids) > limit:
                raise InputTooLong(i, len(ids), limit)
            self.check_ids(i, ids)
            rows.append(Row(np.array(ids, np.int32)))
        return rows

    def check_ids(self, index: int, ids: Sequence[int]) -> None:
        """InvalidTokenId for the first id of input `index` outside the vocabulary."""
        vocab_size = self.parts.config.vocab_size
        j = next((j for j, t in enumerate(ids) if not 0 <= t < vocab_size), None)
        if j is not None:
            raise InvalidTokenId(index, j, ids[j], vocab_size)

    def plan(
        self,
        texts: Sequence[str],
        text_pair: Sequence[str | None] | None,
        recipe: Recipe,
        batch_size: int,
        *,
        prepare: Any = None,
    ) -> Iterator[tuple[list[int], list[Encoding]]]:
        """(positions, encodings) of each batch in the order they run (numbert.pipeline.planner.plan_texts), the
        texts turned into the tokenizer's text by `prepare` (default: the recipe's prompt and lowercasing)."""
        texts = text_list(texts)
        pair_list = [None] * len(texts) if text_pair is None else text_list(text_pair, none_ok=True, name="text_pair")
        if len(pair_list) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(pair_list)} pairs")
        return planner.plan_texts(
            self.require_tokenizer(),
            texts,
            pair_list,
            batch_size=planner.positive("batch_size", batch_size),
            limit=recipe.max_length,
            window=recipe.long == "window",
            side=recipe.truncation_side,
            prepare=recipe.prepare if prepare is None else prepare,
        )

    def pair_limit(self, max_length: int | None = None) -> int:
        """Tokens per pair, [CLS] and both [SEP]s included: `max_length`, else CrossEncoder's (sentence_bert_config's
        max_seq_length, else the tokenizer's model_max_length), at most the model's positions."""
        positions = self.parts.config.max_tokens
        if max_length is not None:
            if isinstance(max_length, bool) or not isinstance(max_length, int) or not 4 <= max_length <= positions:
                raise ValueError(f"max_length must be an integer between 4 and {positions}, got {max_length!r}")
            return max_length
        st = self.parts.sentence_config
        limit = st.max_seq_length if st is not None and st.max_seq_length else self.require_tokenizer().model_max_length
        return min(limit or positions, positions)

    def segment(self, text: str) -> str:
        """How a query or a document is handed to the tokenizer: lowercased if the model's sentence_bert_config
        says do_lower_case, and "" as " " (no tokens either way), so that an empty document keeps its segment
        ([CLS] query [SEP] [SEP]) as in CrossEncoder's batch call, where Tokenizer.encode would drop it."""
        st = self.parts.sentence_config
        lower = st is not None and st.do_lower_case
        return (text.lower() if lower else text) or " "

    def multi_limit(self, is_query: bool) -> int:
        """Tokens a query (or document) is cut to, markers and expansion included: the ColBERT recipe's length
        (a "min" expansion: at least its length), else the sentence config's max_seq_length, else the model's."""
        limit = self.parts.config.max_tokens
        st = self.parts.sentence_config
        default = min(st.max_seq_length, limit) if st is not None and st.max_seq_length else limit
        c = self.parts.colbert
        if c is None:
            return default
        length = c.query_length if is_query else c.document_length
        length = default if length is None else min(length, limit)
        if is_query and c.expansion is not None:
            length = c.expansion.length if c.expansion.strategy == "fixed" else max(length, c.expansion.length)
        return min(length, limit)

    def multi_rows(
        self, texts: Sequence[str], *, is_query: bool, truncate: bool = True, side: str | None = None
    ) -> list[Row]:
        """A row per text as a multi-vector model reads a query (or a document), within `multi_limit` tokens: cut
        there (on `side`, default the tokenizer's) if `truncate` or the ColBERT recipe names the length, else
        InputTooLong naming the first text too long.

        ColBERT: the text with its prompt ("query" or "document": MultiVectorEncoder's markers) and lowercasing;
        PyLate's marker token inserted after [CLS]; a query shorter than the expansion length padded with the
        expansion token ([MASK]), which only reads the query unless the recipe attends to it. BGE-M3: the text."""
        c = multi_vector_kind(self.parts)
        tokenizer = self.require_tokenizer()
        side = side or tokenizer.truncation_side
        limit = self.multi_limit(is_query)
        if not isinstance(c, ColbertConfig):  # BGE-M3: the text as it is
            return [row_of(self.bounded(i, t, None, limit, truncate=truncate, side=side)) for i, t in enumerate(texts)]
        st = self.parts.sentence_config
        prompt = self.multi_prompt(is_query)
        lower = st is not None and st.do_lower_case
        marker = c.query_marker if is_query else c.document_marker
        marker_id = None if not marker else self.token_id(marker)
        cut = truncate or (c.query_length if is_query else c.document_length) is not None or is_query and c.expansion
        rows = []
        for i, text in enumerate(texts):
            text = prompt + (text.lower() if lower else text)
            encoding = self.bounded(i, text, None, limit - (marker_id is not None), truncate=bool(cut), side=side)
            ids = np.asarray(encoding.ids, np.int32)
            if marker_id is not None:  # PyLate: [CLS] marker text [SEP]
                ids = np.concatenate([ids[:1], [marker_id], ids[1:]]).astype(np.int32)
            attended = None
            e = c.expansion
            if is_query and e is not None and len(ids) < e.length:
                expansion_id = self.token_id(e.token) if e.token is not None else tokenizer.mask_token_id
                attended = None if e.attend else len(ids)
                ids = np.concatenate([ids, np.full(e.length - len(ids), expansion_id, np.int32)])
            rows.append(Row(ids, None, attended))
        return rows

    def multi_prompt(self, is_query: bool) -> str:
        """The text put before a query (document) of a ColBERT model: MultiVectorEncoder's prompt "query"
        ("document"); PyLate's default prompt, if it names one (its markers are tokens, not prompts)."""
        st, c = self.parts.sentence_config, self.parts.colbert
        if st is None or c is None:
            return ""
        if c.library == "PyLate":
            return st.prompts.get(st.default_prompt_name, "") if st.default_prompt_name else ""
        return st.prompts.get("query" if is_query else "document", "")

    def token_id(self, token: str) -> int:
        """A token's id in the vocabulary, or a ValueError naming it (a ColBERT marker or expansion token)."""
        vocab = self.require_tokenizer().vocab
        if token not in vocab:
            name = self.parts.name
            raise ValueError(f"{name}: the token {token!r} its ColBERT recipe names is not in its vocabulary")
        return vocab[token]
