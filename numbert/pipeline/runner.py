"""The runner: rows -> a forward -> an Output, the one path every engine's batches take (the command line, the
server's lanes, worker processes, Dask, the tasks). A planned batch runs as one forward, right-padded to its longest
row; a single row longer than the model as overlapping windows, stitched (numbert.pipeline.planner.run); each
through a task's adapters if asked (jina-embeddings-v3), its last layer checked for NaN once per model.

    runner = pipeline.runner
    out = runner.run(rows)                                          # one forward: an Output (batch, ...)
    out = runner.run(rows, limit=512, stride=128, last_layers=1)    # a long single row: windows, stitched
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from ..model.encoder import Encoder, Output
from . import planner
from .planner import Row
from .recipe import Recipe

log = logging.getLogger(__name__)  # once per model: its outputs are not finite (`checked`)


class Runner:
    """A model's encoder run on rows: one forward, or one long row's windows."""

    def __init__(self, encoder: Encoder, name: str | None):
        self.encoder = encoder
        self.name = name  # the model's name, in the warning
        self.warned_not_finite = False  # `checked` has warned about this model

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        *,
        output_attentions: bool = False,
        one_token: str | None = None,
        every_position: bool = False,
    ) -> Output:
        """The encoder on token-id arrays of shape (seq,) or (batch, seq): `Encoder.forward` (one_token: the last
        layer for each row's first or last real token alone, for a reader of that token; every_position: the
        positions the mask hides get hidden states too, as in transformers, for numbert.transformers)."""
        return self.encoder.forward(
            input_ids,
            token_type_ids,
            attention_mask,
            output_attentions=output_attentions,
            one_token=one_token,
            every_position=every_position,
        )

    def run(
        self,
        rows: Sequence[Row],
        task: str | None = None,
        *,
        output_attentions: bool = False,
        one_token: str | None = None,
        limit: int | None = None,
        stride: int | None = None,
        window_batch: int = 32,
        last_layers: int | None = None,
    ) -> Output:
        """A planned batch's Output, through `task`'s adapters (jina-embeddings-v3: Encoder.adapted; None: none):
        one forward over rows of different lengths, right-padded to the longest, arrays (batch, ...); or, for a
        single row over `limit` tokens, its windows of `limit` sharing `stride` (None: the default,
        `windows.stride_or_default`), `window_batch` at a time, stitched (an Output without a batch axis).
        one_token: the last layer for each row's first or last token alone, for a readout that reads nothing else (not
        windows); last_layers: only the last hidden states a readout reads are kept (None: every layer's)."""
        encoder = self.encoder.adapted(task)
        out = planner.run(
            encoder,
            rows,
            limit,
            stride,
            window_batch,
            one_token,
            last_layers,
            output_attentions=output_attentions,
        )
        return self.checked(out)

    def recipe_vectors(self, rows: Sequence[Row], recipe: Recipe, window_batch: int = 32) -> np.ndarray:
        """A planned batch's sentence vectors by `recipe` (before its `finish`): `run` as the recipe asks it (its
        task, first positions, length, stride and the last layers it reads). ([rows,] width)"""
        out = self.run(
            rows,
            recipe.task,
            one_token=recipe.one_token,
            limit=recipe.max_length,
            stride=recipe.stride,
            window_batch=window_batch,
            last_layers=recipe.last_layers,
        )
        return recipe.sentence_vectors(out)

    def windows(self, row: Row, size: int, stride: int | None, batch_size: int = 32) -> Output:
        """One row of any length as windows of `size` tokens sharing `stride`, stitched into one Output (no batch
        axis; even a row that fits one window)."""
        planner.positive("batch_size", batch_size)
        return planner.run_windows(self.encoder, row, size, stride, batch_size)

    def checked(self, out: Output) -> Output:
        """`out`, after one warning line (once per model, on the "numbert" logger: stderr unless logging is set up)
        if its last layer holds NaN or infinity: weights or a config that are not finite make every answer NaN.
        Scanning every weight at load would cost more than the load itself (all-MiniLM-L6-v2 and bert-base,
        memory-mapped), so the load checks only when asked (check_finite=True) and each forward's last layer, a
        small part of its work, is checked here."""
        with np.errstate(invalid="ignore", over="ignore"):
            finite = bool(np.isfinite(out.hidden_states[-1].sum(dtype=np.float64)))
        if not finite and not self.warned_not_finite:
            self.warned_not_finite = True
            log.warning(
                "numbert: model %r computed NaN or infinite hidden states: its weights or config hold non-finite "
                "numbers; load it with check_finite=True to name the tensor",
                self.name,
            )
        return out
