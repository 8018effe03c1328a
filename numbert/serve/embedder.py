"""The model as the server runs it: its recipe (numbert.pipeline.recipe), the readout of each task, and request inputs
turned into rows of token ids with the server's length checks.

A cross-encoder's inputs (/rerank, /v1/rerank, /predict) are pairs, tokenized as numbert.pipeline.reranking tokenizes
them (`[CLS] query [SEP] document [SEP]`, type ids 1 on the document, cut by longest_first to its pair limit),
and scored by the classifier's logits (a readout of its own, so the queue never mixes them with vectors).

Whatever batches the rows share, the answer for a text is `model.embed([text], recipe=...)` of the
server's recipe: the same tokens (the prompt prepended, lowercased first for a sentence-transformers
model that says do_lower_case, cut to the same max_length), the same pooling, layers and Dense layers,
the same normalization.
"""

from __future__ import annotations

import bisect
import functools
import re

import numpy as np

from .. import Tokenizer, load
from ..pipeline import reranking, sparse
from ..pipeline.planner import Row, forward, row_of
from ..pipeline.readouts import SentenceVectors, SequenceLogits, SparseVectors, TokenVectors
from ..pipeline.recipe import Recipe
from ..pipeline.tasks import SCORE_FUNCTIONS, score_function
from ..tokenizer import Encoding
from .protocol import ApiError
from .settings import Settings

# BERT starts a new token before these, whatever precedes them: whitespace (not all: BERT deletes some,
# joining words), ASCII punctuation and CJK ideographs, each a word of its own.
BOUNDARY = re.compile("[ \t\n\r!-/:-@\\[-`{-~\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
WHITESPACE_RUN = re.compile("[ \t\n\r]{2,}")
HEAD_CHARS_PER_TOKEN = 16  # a long text is counted in pieces of 16 characters per token, far more than texts average


class Embedder:
    """A loaded model with the server's recipe and the readouts of its tasks."""

    def __init__(self, settings: Settings, path: str | None = None):
        """The model at `path` (default: settings.model) with the server's recipe choices."""
        path = settings.model if path is None else path
        self.model = model = load(path)
        if model.tokenizer is None:
            raise ValueError(f"{path} has no vocab.txt, so it cannot embed text")
        self.tokenizer: Tokenizer = model.tokenizer
        st = model.sentence_config
        # a SparseEncoder (SPLADE) model answers /embed_sparse only: its recipe just prepares texts
        self.sparse_only = st is not None and st.splade is not None and settings.recipe.get("pooling") is None
        self.choices = dict(settings.recipe) | ({"pooling": "mean"} if self.sparse_only else {})  # None: the model's
        self.recipe = model.recipe(**self.choices)  # checked before the server answers anything
        self.embedding = SentenceVectors(self.recipe)  # the readout every embedding request queues for
        self.token_vectors = TokenVectors()  # /embed_all's readout: the last hidden state of every token
        self.vocab_size = model.config.vocab_size
        self.pair_limit = reranking.pair_limit(model)  # tokens per scored input, as CrossEncoder reads the model
        self.segment = reranking.segment(model)

    @property
    def dim(self) -> int:
        return self.recipe.dim

    @property
    def max_length(self) -> int:
        return self.recipe.max_length

    def warm_up(self) -> None:
        """One forward of [CLS] [SEP], so that the first request finds the weights' pages mapped in."""
        self.embedding(forward(self.model.encoder, [Row(np.array(self.tokenizer.encode("").ids, np.int32))]))

    def request_recipe(
        self, prompt_name: str | None, normalize: bool | None, dimensions: int | None, precision: str | None = None
    ) -> Recipe:
        """The server's recipe with a request's choices: the model's prompt `prompt_name` (a 422 if it has
        no such prompt), normalization, dimensions and precision (None keeps the server's). int8 and uint8 are
        scaled by the served recipe's ranges if it has them (at its precision and width), else by the min and
        max of the request's own vectors, as quantize_embeddings scales them without ranges."""
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
        self.check_dimensions(dimensions)
        if recipe.ranges is not None and dimensions not in (None, recipe.ranges.shape[1]):
            raise ApiError(
                400,
                f"'dimensions' is {dimensions}; this server quantizes vectors of {recipe.ranges.shape[1]} dimensions "
                f"by its calibration ranges",
                param="dimensions",
            )
        return recipe.with_output(normalize=normalize, dimensions=dimensions, precision=precision)

    @functools.cached_property
    def scores(self) -> SequenceLogits:
        """The readout of /rerank, /v1/rerank and /predict: the classifier's logits per row; a 400 naming the
        missing tensors when the model has no sequence classifier (the embedding routes keep working)."""
        try:
            return SequenceLogits(self.model.heads.sequence_classifier)
        except ValueError as e:
            raise ApiError(400, f"this model cannot score inputs: {e}", code="model_not_a_classifier") from None

    def model_type(self) -> dict:
        """text-embeddings-inference's model_type: {"reranker" | "classifier": {"id2label", "label2id"}} for a
        model with a sequence classifier (a reranker has one label), else {"embedding": {"pooling"}}."""
        try:
            self.scores  # noqa: B018 (the readout, made once: a 400 without a sequence classifier)
        except ApiError:
            return {"embedding": {"pooling": "+".join(self.recipe.pooling)}}
        labels = self.model.heads.labels
        kind = "reranker" if len(labels) == 1 else "classifier"
        return {kind: {"id2label": dict(enumerate(labels)), "label2id": {n: i for i, n in enumerate(labels)}}}

    def decode(self, ids: list[list[int]], skip_special_tokens: bool) -> list[str]:
        """/decode: each list of token ids as text (the tokenizer's WordPiece decoder); a 422 for an id
        outside the vocabulary."""
        for i, row in enumerate(ids):
            self.check_vocabulary(row, f"ids[{i}]")
        return [self.tokenizer.decode(row, skip_special_tokens=skip_special_tokens) for row in ids]

    @functools.cached_property
    def sparse(self) -> SparseVectors:
        """The readout of /embed_sparse: each row's SPLADE vector (numbert.pipeline.sparse); a 400 naming the missing
        tensors when the model has no masked-LM head (the other routes keep working)."""
        try:
            return sparse.readout(self.model)
        except ValueError as e:
            raise ApiError(400, f"this model cannot give sparse vectors: {e}", code="model_has_no_mlm_head") from None

    @property
    def max_active_dims(self) -> int | None:
        """The weights a sparse vector keeps: the SparseEncoder directory's max_active_dims, else all."""
        st = self.model.sentence_config
        return None if st is None else st.max_active_dims

    def relevance(self, raw_scores: bool) -> reranking.Activation:
        """The function a reranker's logits go through (the model's activation, or none with raw_scores); a
        400 unless the classifier has one label, as CrossEncoder.rank requires."""
        labels = len(self.scores.classifier.out.weight)
        if labels != 1:
            raise ApiError(
                400,
                f"reranking needs a cross-encoder with one label (a relevance score); this model's classifier "
                f"has {labels}: use /predict",
                code="model_not_a_reranker",
            )
        try:
            return reranking.activation_of(self.model, "identity" if raw_scores else None)
        except ValueError as e:
            raise ApiError(400, str(e), code="model_not_a_reranker") from None

    def label_scores(self, raw_scores: bool) -> reranking.Activation:
        """/predict's scores of the logits: `numbert classify`'s function (from config.json's problem_type, else
        sigmoid for one label and softmax for several), none with raw_scores; a 400 without a classifier."""
        labels = len(self.scores.classifier.out.weight)
        problem_type = self.model.heads.head_config.problem_type
        return SCORE_FUNCTIONS[score_function("none" if raw_scores else None, problem_type, labels)]

    def pairs_to_rows(
        self,
        firsts: list[str],
        seconds: list[str | None],
        names: list[str],
        truncate: bool,
        hint: str,
        side: str | None = None,
    ) -> list[Row]:
        """A row per input, one text or a pair, as numbert.pipeline.reranking tokenizes it: cut to pair_limit tokens by
        longest_first if `truncate` (on `side`, default the tokenizer's), else a 413 naming the first input
        too long (ending with `hint`)."""
        rows = []
        for first, second, where in zip(firsts, seconds, names):
            encoding = self.tokenizer.encode(
                self.segment(self.collapsed(first)),
                None if second is None else self.segment(self.collapsed(second)),
                max_length=self.pair_limit,
                truncation=truncate,
                truncation_side=side,
            )
            if len(encoding) > self.pair_limit:
                raise ApiError(
                    413,
                    f"'{where}' makes an input of {len(encoding)} tokens; this model takes at most "
                    f"{self.pair_limit} ([CLS] and [SEP]s included). Shorten it{hint}",
                    param=where,
                    code="input_too_long",
                )
            rows.append(row_of(encoding))
        return rows

    def texts_to_rows(
        self,
        texts: list[str],
        truncate: bool,
        name: str,
        recipe: Recipe | None = None,
        hint: str = "",
        side: str | None = None,
    ) -> list[Row]:
        """A row per text as `recipe` (default: the server's) prepares it, cut to max_length if `truncate` (on
        `side`, default the recipe's), else a 413 naming the first text too long (and ending with `hint`, how the
        client may cut it)."""
        recipe = recipe or self.recipe
        side = side or recipe.truncation_side
        rows = []
        for i, text in enumerate(texts):
            encoding = self.bounded(recipe.prepare(text), f"{name}[{i}]", truncate=truncate, hint=hint, side=side)
            rows.append(Row(np.array(encoding.ids, np.int32)))
        return rows

    def bounded(
        self,
        text: str,
        where: str,
        *,
        truncate: bool = False,
        special: bool = True,
        hint: str = "",
        side: str = "right",
    ) -> Encoding:
        """A prepared text's tokens, at most max_length with [CLS] and [SEP] counted: cut there (on `side`) if
        `truncate`, else a 413 naming `where`. Only as much of a long text is tokenized as decides it: its first
        max_length tokens when cutting its end (`decisive_prefix`), its last ones when cutting its start
        (`decisive_suffix`), one token too many otherwise. `special`: whether the encoding holds [CLS] and
        [SEP] (they count towards max_length either way)."""
        if truncate and side == "left":
            decisive = self.decisive_suffix(text, self.max_length)
        else:
            decisive = self.decisive_prefix(text, self.max_length + (not truncate))
        encoding = self.tokenize(decisive, self.max_length if truncate else None, special, side)
        tokens = len(encoding) + (0 if special else 2)
        if tokens > self.max_length:
            count = f"{tokens}" if decisive is text else f"at least {tokens}"
            raise ApiError(
                413,
                f"'{where}' is {count} tokens long; this model takes at most {self.max_length} "
                f"(special tokens included). Shorten it{hint}",
                param=where,
                code="input_too_long",
            )
        return encoding

    def decisive_prefix(self, text: str, enough: int) -> str:
        """The shortest beginning of `text` that holds `enough` tokens ([CLS] and [SEP] counted), cut where a
        token starts; else `text` itself.

        The text is counted a piece of HEAD_CHARS_PER_TOKEN x max_length characters at a time, each piece
        ending before whitespace, an ASCII punctuation mark or a CJK ideograph (BERT starts a token there,
        so the pieces' tokens add up to the text's; a cut inside a special token such as [MASK] is skipped).
        So a text of megabytes costs a few pieces, never its whole tokens, to be found too long."""
        step, start, count = HEAD_CHARS_PER_TOKEN * self.max_length, 0, 2
        while len(text) - start > step:
            end = self.token_boundary(text, start + step)
            if end is None:
                break
            count += len(self.tokenize(text[start:end], None, special=False))
            if count >= enough:
                return text[:end]
            start = end
        return text

    def decisive_suffix(self, text: str, enough: int) -> str:
        """The shortest end of `text` that holds `enough` tokens ([CLS] and [SEP] counted) and one piece more,
        cut where a token starts; else `text` itself. Counted in pieces as `decisive_prefix` counts, from the
        end; the spare piece keeps the tokens a left cut keeps clear of the cut, which a tokenizer other than
        BERT's may tokenize differently (a byte-level BPE joins a space to the punctuation after it)."""
        step, end, count, reached = HEAD_CHARS_PER_TOKEN * self.max_length, len(text), 2, False
        while end > step:
            start = self.token_boundary(text, end - step)
            if start is None or start >= end:
                break
            if reached:  # the spare piece
                return text[start:]
            count += len(self.tokenize(text[start:end], None, special=False))
            reached = count >= enough
            end = start
        return text

    def token_boundary(self, text: str, at: int) -> int | None:
        """The first position from `at` where BERT starts a new token whatever comes before, or None."""
        for match in BOUNDARY.finditer(text, at):
            cut = match.start()
            if not any(s in text[max(0, cut - len(s) + 1) : cut + len(s) - 1] for s in self.tokenizer.special_tokens):
                return cut
        return None

    def tokenize(self, text: str, max_length: int | None, special: bool = True, side: str = "right") -> Encoding:
        """A prepared text's tokens as `Bert.embed` makes them, cut to max_length on `side`; [CLS] and [SEP] if
        `special`.

        Runs of whitespace become one space first where that gives the same tokens (`collapsed`)."""
        return self.tokenizer.encode(
            self.collapsed(text),
            add_special_tokens=special,
            max_length=max_length,
            truncation=max_length is not None,
            truncation_side=side,
        )

    def collapsed(self, text: str) -> str:
        """`text` with each run of whitespace made one space, when the tokenizer makes the same tokens of both
        (WordPiece: BERT's tokenizer takes time quadratic in the length of a run, 8000 spaces: 1 s, which a
        hostile request would otherwise exploit); else `text` (byte-level BPE makes tokens of the spaces)."""
        return text if self.tokenizer.whitespace_runs_matter else WHITESPACE_RUN.sub(" ", text)

    def tokenize_inputs(self, texts: list[str], special: bool, max_tokens: int) -> list[Encoding]:
        """/tokenize's encodings: each text's tokens (lowercased first if the model says so), offsets into the
        text; a 413 for a text over max_length tokens or, as soon as they pass it, for over `max_tokens` in all."""
        encodings, total = [], 0
        for i, text in enumerate(texts):
            encoding = self.bounded(text, f"inputs[{i}]", special=special)
            total += len(encoding)
            if total > max_tokens:
                raise ApiError(
                    413,
                    f"the inputs up to 'inputs[{i}]' are {total} tokens; /tokenize answers at most {max_tokens} "
                    f"tokens a request (--max-batch-tokens): send fewer inputs at a time",
                    param="inputs",
                    code="input_too_long",
                )
            if not self.tokenizer.whitespace_runs_matter:
                encoding.offsets = offsets_before_collapsing(text, encoding.offsets)
            encodings.append(encoding)
        return encodings

    def ids_to_rows(self, inputs: list[list[int]], name: str) -> list[Row]:
        """Token-id inputs, used as given ([CLS] and [SEP] included, as /tokenize returns them): a 422 for an id
        outside the vocabulary, a 413 for an input over max_length (ids are never cut)."""
        rows = []
        for i, ids in enumerate(inputs):
            if len(ids) > self.max_length:
                raise ApiError(
                    413,
                    f"'{name}[{i}]' is {len(ids)} tokens long; this model takes at most "
                    f"{self.max_length} (special tokens included); token ids are not truncated",
                    param=f"{name}[{i}]",
                    code="input_too_long",
                )
            self.check_vocabulary(ids, f"{name}[{i}]")
            rows.append(Row(np.array(ids, np.int32)))
        return rows

    def check_vocabulary(self, ids: list[int], where: str) -> None:
        """A 422 naming the first id outside the vocabulary, as `where[j]`."""
        j = next((j for j, t in enumerate(ids) if not 0 <= t < self.vocab_size), None)
        if j is not None:
            raise ApiError(
                422,
                f"'{where}[{j}]' is {ids[j]}, not a token id of this model's vocabulary [0, {self.vocab_size})",
                param=f"{where}[{j}]",
                code="invalid_token_id",
            )

    def check_dimensions(self, dimensions: int | None) -> None:
        """`dimensions` (Matryoshka: the first values, renormalized if the vectors are) is at most the width."""
        if dimensions is not None and dimensions > self.recipe.width:
            raise ApiError(
                400, f"'dimensions' is {dimensions}; this model's vectors have {self.recipe.width}", param="dimensions"
            )


def offsets_before_collapsing(text: str, offsets: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Character offsets into `text` of tokens whose offsets index WHITESPACE_RUN.sub(" ", text).

    Each run of n whitespace characters became one space, so a position past it moves right by n - 1;
    tokens never hold whitespace, so no offset falls inside a run."""
    shifts, shift = [], 0  # (position in the collapsed text after which `shift` applies)
    for run in WHITESPACE_RUN.finditer(text):
        shift += run.end() - run.start() - 1
        shifts.append((run.end() - shift, shift))
    if not shifts:
        return offsets
    starts = [at for at, _ in shifts]

    def moved(position: int) -> int:
        k = bisect.bisect_right(starts, position) - 1
        return position + (shifts[k][1] if k >= 0 else 0)

    return [(a, b) if a == b == 0 else (moved(a), moved(b - 1) + 1) for a, b in offsets]
