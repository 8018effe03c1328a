"""The model as the server runs it: the sentence recipe `Bert.embed` would use, inputs turned into token ids
with the server's length checks, and pooled vectors finished (normalized, shortened) per request.

Whatever batches the rows share, the answer for a text is `model.embed([text], **options)` of the
server's options: the same tokens (the prompt prepended, lowercased first for a sentence-transformers
model that says do_lower_case, cut to the same max_length), the same pooling, layers and Dense layers,
the same normalization.
"""

from __future__ import annotations

import re
from typing import cast

import numpy as np

from .. import Tokenizer, load, recipes
from ..model import Output
from ..tokenizer import Encoding
from .protocol import ApiError
from .settings import Settings

WHITESPACE = re.compile("[ \t\n\r]")  # BERT splits words at these (it deletes some other whitespace, joining words)
WHITESPACE_RUN = re.compile("[ \t\n\r]{2,}")
HEAD_CHARS_PER_TOKEN = 16  # a long text's head: 16 characters per token allowed, far more than texts average


class Embedder:
    """A loaded model with the server's recipe: pooling, layers, combine, Dense layers, normalize, prompt,
    max_length."""

    def __init__(self, settings: Settings):
        self.model = model = load(settings.model)
        if model.tokenizer is None:
            raise ValueError(f"{settings.model} has no vocab.txt, so it cannot embed text")
        self.tokenizer: Tokenizer = model.tokenizer
        s = settings  # the model resolves the options it is not given, exactly as Bert.embed does
        self.pooling, self.layers, self.combine, self.normalize = model._sentence_recipe(
            s.pooling, s.layers, s.combine, s.normalize
        )
        self.dense = model._dense_layers(s.pooling)
        self.default_prompt = model._prompt(s.prompt, s.prompt_name)
        empty = cast(
            np.ndarray,
            model.embed(
                [],
                pooling=s.pooling,
                layers=s.layers,
                combine=s.combine,
                prompt=s.prompt,
                prompt_name=s.prompt_name,
                progress=False,
            ),
        )
        self.dim = empty.shape[1]  # (0, dim): the recipe is checked before the server answers anything
        self.max_length = model._max_length(settings.max_length)
        self.lowercase = model.sentence_config is not None and model.sentence_config.do_lower_case
        self.vocab_size = model.config.vocab_size

    def warm_up(self) -> None:
        """One forward of [CLS] [SEP], so that the first request finds the weights' pages mapped in."""
        self.sentence_vectors(self.model.forward(np.array(self.tokenizer.encode("").ids)))

    def sentence_vectors(self, out: Output) -> np.ndarray:
        """A forward's sentence vectors, pooled by the recipe, through the model's Dense layers. (rows, dim)"""
        vectors = out.sentence_vector(self.pooling, self.layers, self.combine)
        for layer in self.dense:
            vectors = layer(vectors)
        return vectors

    def prompt(self, prompt_name: str | None) -> str:
        """The text prepended to each text input: the model's prompt `prompt_name`, else the server's prompt."""
        if prompt_name is None:
            return self.default_prompt
        if self.model.sentence_config is None:
            raise ApiError(
                422,
                "'prompt_name' names one of a sentence-transformers model's prompts; this model has none",
                param="prompt_name",
            )
        try:
            return self.model._prompt(None, prompt_name)
        except ValueError as e:
            raise ApiError(422, f"'prompt_name': {e}", param="prompt_name") from None

    def texts_to_rows(self, texts: list[str], truncate: bool, name: str, prompt: str = "") -> list[np.ndarray]:
        """Token ids per text (`prompt` + text), cut to max_length if `truncate`, else a 413 naming the first
        text too long.

        A long text is tokenized up to a whitespace past HEAD_CHARS_PER_TOKEN x max_length characters
        first: the tokens of such a head are the text's first tokens, so when they are already too many
        (or, truncating, enough) the rest of the text is never tokenized."""
        rows = []
        for i, text in enumerate(texts):
            text = prompt + text
            head = self.head(text)
            encoding = self.encode(head, self.max_length if truncate else None)
            if head is not text and len(encoding) < self.max_length + (not truncate):  # the head does not decide
                head, encoding = text, self.encode(text, self.max_length if truncate else None)
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
            rows.append(np.array(encoding.ids, np.int32))
        return rows

    def head(self, text: str) -> str:
        """`text`, or if it is long, its beginning up to the first whitespace past HEAD_CHARS_PER_TOKEN x max_length."""
        if len(text) <= (start := HEAD_CHARS_PER_TOKEN * self.max_length):
            return text
        space = WHITESPACE.search(text, start)
        return text if space is None else text[: space.start()]

    def encode(self, text: str, max_length: int | None) -> Encoding:
        """`text`'s tokens as `Bert.embed` makes them: lowercased first if the model says so; cut to max_length.

        Runs of whitespace become one space first: the same tokens, and the tokenizer takes time quadratic
        in the length of a run (8000 spaces: 1 s), which a hostile request would otherwise exploit."""
        text = WHITESPACE_RUN.sub(" ", text)
        return self.tokenizer.encode(
            text.lower() if self.lowercase else text, max_length=max_length, truncation=max_length is not None
        )

    def ids_to_rows(self, inputs: list[list[int]], name: str) -> list[np.ndarray]:
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
            rows.append(np.array(ids, np.int32))
        return rows

    def finish(self, vectors: np.ndarray, normalize: bool, dimensions: int | None) -> np.ndarray:
        """Pooled (n, dim) vectors as answered: L2-normalized if asked; shortened to `dimensions` and renormalized."""
        if normalize:
            vectors = recipes.normalize(vectors)
        if dimensions is not None:
            vectors = recipes.normalize(vectors[:, :dimensions])
        return vectors

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
        if dimensions > self.dim:
            raise ApiError(
                400, f"'dimensions' is {dimensions}; this model's vectors have {self.dim}", param="dimensions"
            )
