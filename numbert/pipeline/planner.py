"""The batch planner: texts become rows of token ids, rows become padded batches, batches run through the encoder.

    rows     one input's token ids, [CLS] ... [SEP] (and its token type ids for a pair)
    plan     which rows share a forward: inputs of like length together, so a batch pads little
    run      one forward over a planned batch, right-padded to its longest row; a single row longer
             than the model runs as overlapping windows (numbert.model.windows)

Two planners, one for each way work arrives:

- `by_length` plans a corpus known in advance (embed, the command line, workers): rows longest first,
  a fixed number per batch. `plan_texts` tokenizes LOOK_AHEAD batches' worth of texts at a time and
  plans each block, so memory does not grow with the corpus.
- `next_batch` plans a queue that fills as requests arrive (the server): the oldest waiting row with
  the neighbours by length that make its forward cheapest per real token, within a token budget.

A vector depends on its batch-mates in its last bits (BLAS sums in an order that depends on the padded
shape), so every engine that must give the same bits runs the same plan: worker processes receive the
planned rows of each batch, never texts to plan again.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import NamedTuple, Protocol, TypeVar

import numpy as np

from ..model.encoder import Encoder, Output
from ..model.windows import average_windows, stride_or_default, window_spans
from ..tokenizer import Encoding, Tokenizer
from ..tokenizer.encoding import pad

LOOK_AHEAD = 8  # batches: plan_texts tokenizes this many batches' worth of texts at a time
FORWARD_OVERHEAD = 32  # a forward's fixed cost, in tokens' worth of work (all-MiniLM-L6-v2, one BLAS thread: about 26)
GROUP_OVERHEAD = 2  # and each group of rows of one length its attention runs as (about 1.7)


class Row(NamedTuple):
    """One input as the encoder reads it."""

    ids: np.ndarray  # (seq,) int32 token ids, [CLS] ... [SEP]
    type_ids: np.ndarray | None = None  # (seq,) int32 segment ids of a pair; None: all 0 (one text)
    # the first `attended` tokens are read by every token; the rest read them but are never read (ColBERT's query
    # expansion: [MASK]s that soak up the query). None: every token is read.
    attended: int | None = None


def row_of(encoding: Encoding) -> Row:
    """The Row of a tokenizer Encoding (type ids kept only when a second segment has them)."""
    type_ids = np.asarray(encoding.type_ids, np.int32)
    return Row(np.asarray(encoding.ids, np.int32), type_ids if type_ids.any() else None)


# --- running a planned batch -----------------------------------------------------------------------------


def forward(
    encoder: Encoder,
    rows: Sequence[Row],
    *,
    output_attentions: bool = False,
    one_token: str | None = None,
    last_layers: int | None = None,
) -> Output:
    """One forward over rows of different lengths, right-padded to the longest. Output arrays (batch, ...);
    one_token: each row's first or last real token alone in the last layer, for a readout that reads nothing else;
    last_layers: only the last hidden states kept, for a readout that reads those alone (`Encoder.forward`).

    A row whose tokens past `attended` are read by none (ColBERT's query expansion) has them masked out of the
    attention mask, and every position of the batch runs, as transformers runs a padded batch."""
    batch = pad(rows, encoder.config.pad_token_id)
    mask, expanded = batch.attention_mask, False
    for i, row in enumerate(rows):
        if row.attended is not None:
            mask[i, row.attended :] = 0
            expanded = True
    return encoder.forward(
        batch.input_ids,
        batch.token_type_ids,
        mask,
        output_attentions=output_attentions,
        every_position=expanded,
        one_token=one_token,
        last_layers=last_layers,
    )


def run(
    encoder: Encoder,
    rows: Sequence[Row],
    limit: int | None,
    stride: int | None,
    window_batch: int,
    one_token: str | None = None,
    last_layers: int | None = None,
    *,
    output_attentions: bool = False,
) -> Output:
    """A planned batch's Output: one forward (its last layer for one token a row if `one_token`), or for a
    single row over `limit` tokens (None: no limit) its windows, stitched (an Output without a batch axis, as
    `run_windows` gives, every position computed: each token's states are averaged over the windows holding it;
    the `last_layers` hidden states alone, if given: a forward keeps only those)."""
    if limit is not None and len(rows) == 1 and len(rows[0].ids) > limit:
        return run_windows(encoder, rows[0], limit, stride, window_batch, last_layers)
    return forward(encoder, rows, output_attentions=output_attentions, one_token=one_token, last_layers=last_layers)


WINDOW_BATCH_TOKENS = 8_192  # the tokens of the windows one forward runs at most (one window at least)
STITCHED_BYTES = 1 << 30  # the most a long text's stitched hidden states may hold (run_windows)


def run_windows(
    encoder: Encoder, row: Row, size: int, stride: int | None, batch_size: int, last_layers: int | None = None
) -> Output:
    """Run an untruncated single text ([CLS] content [SEP]) as windows of `size` tokens, [CLS] and [SEP]
    included, `batch_size` windows at a time (at most WINDOW_BATCH_TOKENS tokens, one window at least), and stitch
    them into one Output (no batch axis) of every hidden state, or of the `last_layers` alone (what a recipe reads:
    memory then grows with the text by those layers only). A text whose stitched states would pass
    STITCHED_BYTES is refused before anything runs, naming the limit."""
    cls, content, sep = row.ids[0], row.ids[1:-1], row.ids[-1]
    spans = window_spans(len(content), size - 2, stride_or_default(stride, size - 2))
    c = encoder.config
    kept = c.num_hidden_layers + 1 if last_layers is None else min(last_layers, c.num_hidden_layers + 1)
    need = kept * (len(row.ids)) * c.hidden_size * 4
    if need > STITCHED_BYTES:
        raise ValueError(
            f"a text of {len(row.ids):,} tokens run as windows would hold {need / 2**30:.1f} GiB of stitched hidden "
            f"states ({kept} layers x {len(row.ids):,} tokens x {c.hidden_size}); numbert's limit is "
            f"{STITCHED_BYTES / 2**30:.0f} GiB: cut the text, or read fewer layers (layers=-1)"
        )
    batch_size = max(1, min(batch_size, WINDOW_BATCH_TOKENS // size))

    def window_states() -> Iterator[tuple[int, np.ndarray]]:  # (start, (kept layers, window length, hidden))
        for b in range(0, len(spans), batch_size):
            batch = spans[b : b + batch_size]
            windows = [Row(np.concatenate([[cls], content[s:e], [sep]]).astype(np.int32)) for s, e in batch]
            hidden_states = forward(encoder, windows, last_layers=kept).hidden_states  # (kept, windows, seq, hidden)
            for r, (s, e) in enumerate(batch):
                yield s, hidden_states[:, r, : e - s + 2]
            del hidden_states  # before the next batch's forward: one batch's states held at a time

    hidden_states = average_windows(window_states(), len(content))  # (kept layers, seq, hidden)
    ids = row.ids.astype(np.int64)
    return Output(ids, np.zeros_like(ids), np.ones_like(ids), hidden_states, encoder.pooler_output(hidden_states[-1]))


# --- planning a corpus: fixed-size batches of like length ----------------------------------------------


def by_length(lengths: Sequence[int], limit: int, batch_size: int) -> list[list[int]]:
    """The positions of each batch, in the order they run: the inputs of up to `limit` tokens longest
    first (ties in input order), `batch_size` at a time, then each longer input alone (as windows)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable: ties keep input order
    fitting = [i for i in order if lengths[i] <= limit]
    return [fitting[start : start + batch_size] for start in range(0, len(fitting), batch_size)] + [
        [i] for i in order if lengths[i] > limit
    ]


def plan_texts(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    pairs: Sequence[str | None],
    *,
    batch_size: int,
    limit: int,
    window: bool,
    side: str | None = None,
    prepare: Callable[[str], str] = str,
) -> Iterator[tuple[list[int], list[Encoding]]]:
    """(positions in `texts`, their encodings) of each batch, in the order they run.

    The texts are taken longest first by characters, LOOK_AHEAD batches' worth at a time, each turned
    into the tokenizer's text by `prepare` (a prompt, lowercasing) and tokenized, cut to `limit` tokens on
    `side` ("right": the end, "left": the start; None: the tokenizer's truncation_side) unless `window` (then
    a longer single text runs alone as windows; a longer pair is an error), and planned `by_length`.
    """
    by_chars = sorted(range(len(texts)), key=lambda i: -len(texts[i]) - len(pairs[i] or ""))  # stable
    for block in range(0, len(texts), LOOK_AHEAD * batch_size):
        chosen = sorted(by_chars[block : block + LOOK_AHEAD * batch_size])  # in input order: ties keep it
        encodings = []
        for i in chosen:
            pair = pairs[i]
            encoding = tokenizer.encode(
                prepare(texts[i]),
                None if pair is None else prepare(pair),
                max_length=None if window else limit,
                truncation=not window,
                truncation_side=side,
            )
            if pair is not None and len(encoding) > limit:
                raise ValueError(
                    f"input {i} is a pair of {len(encoding)} tokens; long='window' runs single "
                    f"texts only (max_length is {limit})"
                )
            encodings.append(encoding)
        for batch in by_length([len(e) for e in encodings], limit, batch_size):
            yield [chosen[j] for j in batch], [encodings[j] for j in batch]


# --- planning a queue: the oldest row first, within a token budget ----------------------------------------


class Waiting(Protocol):
    """A row waiting in a queue: its arrival order and its length in tokens."""

    @property
    def arrival(self) -> int: ...

    @property
    def length(self) -> int: ...


W = TypeVar("W", bound=Waiting)


def next_batch(waiting: Sequence[W], max_tokens: int, max_rows: int) -> list[W]:
    """The oldest waiting row with the neighbours by length that make its forward cheapest per real token.

    The encoder works on a batch's real tokens only (numbert.model.packing: no product reads padding, attention runs
    per group of rows of one length), so a forward costs FORWARD_OVERHEAD + its real tokens + GROUP_OVERHEAD for each
    distinct length: the more rows share it, the less each pays. The waiting rows are sorted longest first (as
    `by_length` sorts a corpus) and a batch is a run of them, padded to its first (longest) row; of the runs holding
    the oldest row, within max_rows and max_tokens (rows x width: the padded arrays' size), the one with the least
    cost per real token goes.
    """
    order = sorted(waiting, key=lambda item: (-item.length, item.arrival))
    lengths = [item.length for item in order]
    # new_length[i]: the number of distinct lengths among order[:i] (sorted, so a change of length is a new one)
    new_length = list(
        itertools.accumulate((i == 0 or lengths[i] != lengths[i - 1] for i in range(len(order))), initial=0)
    )
    k = min(range(len(order)), key=lambda i: order[i].arrival)
    best, best_cost = (k, k + 1), float("inf")
    for a in range(max(0, k - max_rows + 1), k + 1):
        width, real = lengths[a], sum(lengths[a:k])
        for b in range(k + 1, min(len(order), a + max_rows) + 1):
            real += lengths[b - 1]
            if (b - a) * width > max_tokens:
                break
            groups = 1 + new_length[b] - new_length[a + 1]
            cost = (FORWARD_OVERHEAD + real + GROUP_OVERHEAD * groups) / real
            if cost < best_cost:
                best, best_cost = (a, b), cost
    return order[best[0] : best[1]]


# --- what comes in ---------------------------------------------------------------------------------------


def text_list(texts, none_ok: bool = False, name: str = "texts") -> list[str]:
    """The texts as a list of str, or a TypeError naming what came instead: the first item that is
    not a str, bytes, or an unordered container (a set or dict, whose order the answers could not keep)."""
    if isinstance(texts, (bytes, bytearray)):
        raise TypeError(
            f"{name} must be a str or a list of str, not {type(texts).__name__}; decode it first "
            f"(e.g. {name}.decode('utf-8'))"
        )
    if isinstance(texts, (AbstractSet, Mapping)):
        raise TypeError(
            f"{name} is a {type(texts).__name__}, which has no order to give the results in; "
            f"pass a list (e.g. sorted({name}))"
        )
    if isinstance(texts, str) or not isinstance(texts, Iterable):
        raise TypeError(f"{name} must be a str or a list of str, not {type(texts).__name__}")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str) and not (none_ok and t is None):
            raise TypeError(f"{name}[{i}] is a {type(t).__name__}, not a str")
    return texts


def positive(name: str, value) -> int:
    """`value` if it is a positive integer, else a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value
