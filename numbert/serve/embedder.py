"""The model as the server runs it: its recipe (numbert.recipe), the readout of each task, and request inputs
turned into rows of token ids with the server's length checks.

Whatever batches the rows share, the answer for a text is `model.embed([text], recipe=...)` of the
server's recipe: the same tokens (the prompt prepended, lowercased first for a sentence-transformers
model that says do_lower_case, cut to the same max_length), the same pooling, layers and Dense layers,
the same normalization.
"""

from __future__ import annotations

import re

import numpy as np

from .. import Tokenizer, load
from ..planner import Row, forward
from ..readouts import SentenceVectors
from ..recipe import Recipe
from ..tokenizer import Encoding
from .protocol import ApiError
from .settings import Settings

WHITESPACE = re.compile("[ \t\n\r]")  # BERT splits words at these (it deletes some other whitespace, joining words)
WHITESPACE_RUN = re.compile("[ \t\n\r]{2,}")
HEAD_CHARS_PER_TOKEN = 16  # a long text's head: 16 characters per token allowed, far more than texts average


class Embedder:
    """A loaded model with the server's recipe and the readouts of its tasks."""

    def __init__(self, settings: Settings):
        self.model = model = load(settings.model)
        if model.tokenizer is None:
            raise ValueError(f"{settings.model} has no vocab.txt, so it cannot embed text")
        self.tokenizer: Tokenizer = model.tokenizer
        self.choices = dict(settings.recipe)  # the server's recipe choices (None: the model's own)
        self.recipe = model.recipe(**self.choices)  # checked before the server answers anything
        self.embedding = SentenceVectors(self.recipe)  # the readout every embedding request queues for
        self.vocab_size = model.config.vocab_size

    @property
    def dim(self) -> int:
        return self.recipe.dim

    @property
    def max_length(self) -> int:
        return self.recipe.max_length

    def warm_up(self) -> None:
        """One forward of [CLS] [SEP], so that the first request finds the weights' pages mapped in."""
        self.embedding(forward(self.model.encoder, [Row(np.array(self.tokenizer.encode("").ids, np.int32))]))

    def request_recipe(self, prompt_name: str | None, normalize: bool | None, dimensions: int | None) -> Recipe:
        """The server's recipe with a request's choices: the model's prompt `prompt_name` (a 422 if it has
        no such prompt), normalization and dimensions (None keeps the server's)."""
        recipe = self.recipe
        if prompt_name is not None:
            if self.model.sentence_config is None:
                raise ApiError(
                    422,
                    "'prompt_name' names one of a sentence-transformers model's prompts; this model has none",
                    param="prompt_name",
                )
            try:
                recipe = self.model.recipe(**{**self.choices, "prompt": None, "prompt_name": prompt_name})
            except ValueError as e:
                raise ApiError(422, f"'prompt_name': {e}", param="prompt_name") from None
        self.check_dimensions(dimensions, recipe.normalize if normalize is None else normalize)
        return recipe.with_output(normalize=normalize, dimensions=dimensions)

    def texts_to_rows(self, texts: list[str], truncate: bool, name: str, recipe: Recipe | None = None) -> list[Row]:
        """A row per text as `recipe` (default: the server's) prepares it, cut to max_length if `truncate`,
        else a 413 naming the first text too long.

        A long text is tokenized up to a whitespace past HEAD_CHARS_PER_TOKEN x max_length characters
        first: the tokens of such a head are the text's first tokens, so when they are already too many
        (or, truncating, enough) the rest of the text is never tokenized."""
        prepare = (recipe or self.recipe).prepare
        rows = []
        for i, text in enumerate(texts):
            text = prepare(text)
            head = self.head(text)
            encoding = self.tokenize(head, self.max_length if truncate else None)
            if head is not text and len(encoding) < self.max_length + (not truncate):  # the head does not decide
                head, encoding = text, self.tokenize(text, self.max_length if truncate else None)
            if len(encoding) > self.max_length:
                count = f"{len(encoding)}" if head is text else f"at least {len(encoding)}"
                raise ApiError(
                    413,
                    f"'{name}[{i}]' is {count} tokens long; this model takes at most "
                    f"{self.max_length} ([CLS] and [SEP] included). Shorten it, or send "
                    f"truncate=true (or start the server with --auto-truncate)",
                    param=f"{name}[{i}]",
                    code="input_too_long",
                )
            rows.append(Row(np.array(encoding.ids, np.int32)))
        return rows

    def head(self, text: str) -> str:
        """`text`, or if it is long, its beginning up to the first whitespace past HEAD_CHARS_PER_TOKEN x max_length."""
        if len(text) <= (start := HEAD_CHARS_PER_TOKEN * self.max_length):
            return text
        space = WHITESPACE.search(text, start)
        return text if space is None else text[: space.start()]

    def tokenize(self, text: str, max_length: int | None) -> Encoding:
        """A prepared text's tokens as `Bert.embed` makes them, cut to max_length.

        Runs of whitespace become one space first: the same tokens, and the tokenizer takes time quadratic
        in the length of a run (8000 spaces: 1 s), which a hostile request would otherwise exploit."""
        return self.tokenizer.encode(
            WHITESPACE_RUN.sub(" ", text), max_length=max_length, truncation=max_length is not None
        )

    def ids_to_rows(self, inputs: list[list[int]], name: str) -> list[Row]:
        """Token-id inputs, used as given ([CLS] and [SEP] included, as /tokenize returns them): a 422 for an id
        outside the vocabulary, a 413 for an input over max_length (ids are never cut)."""
        rows = []
        for i, ids in enumerate(inputs):
            if len(ids) > self.max_length:
                raise ApiError(
                    413,
                    f"'{name}[{i}]' is {len(ids)} tokens long; this model takes at most "
                    f"{self.max_length} ([CLS] and [SEP] included); token ids are not truncated",
                    param=f"{name}[{i}]",
                    code="input_too_long",
                )
            j = next((j for j, t in enumerate(ids) if not 0 <= t < self.vocab_size), None)
            if j is not None:
                raise ApiError(
                    422,
                    f"'{name}[{i}][{j}]' is {ids[j]}, not a token id of this model's vocabulary [0, {self.vocab_size})",
                    param=f"{name}[{i}][{j}]",
                    code="invalid_token_id",
                )
            rows.append(Row(np.array(ids, np.int32)))
        return rows

    def check_dimensions(self, dimensions: int | None, normalize: bool) -> None:
        """`dimensions` makes sense for unit vectors (cut, then renormalize) and at most the model's width."""
        if dimensions is None:
            return
        if not normalize:
            raise ApiError(
                400,
                "'dimensions' shortens unit-length vectors and renormalizes them; this server "
                "answers vectors that are not normalized (start it with --normalize)",
                param="dimensions",
            )
        if dimensions > self.recipe.width:
            raise ApiError(
                400, f"'dimensions' is {dimensions}; this model's vectors have {self.recipe.width}", param="dimensions"
            )
