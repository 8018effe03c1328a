"""Text in, vectors out: the sentence vectors of many texts by a recipe, and the words of a text with theirs.

These are methods of numbert.Bert (model.embed(texts), model.encode, model.similarity, model.word_vectors).
`embed` is the whole pipeline in a few lines: the model plans the texts into batches of rows
(numbert.pipeline.planner), each batch runs through the encoder here or in worker processes (a WorkerPool such as
numbert.engines.workers.Pool, handed the planned rows), the recipe (numbert.pipeline.recipe) pools each row, and the
vectors, back in input order, are finished together (normalized, cut to `dimensions`, quantized to `precision`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from ..model import pooling
from ..model.encoder import Output
from ..runtime import blas
from ..runtime.side_by_side import in_order
from ..tokenizer import Encoding
from ..tokenizer.tokenizer import alias
from . import planner
from .pipeline import Pipeline, with_tokens
from .planner import Row, row_of, text_list
from .recipe import Recipe, check_long


class WorkerPool(Protocol):
    """Runs planned batches of rows somewhere else (numbert.engines.workers.Pool): each batch's pooled vectors,
    in order."""

    def map(
        self, recipe: Recipe, batches: Iterable[tuple[list[int], list[Row]]], window_batch: int
    ) -> Iterator[tuple[Sequence[int], np.ndarray]]: ...


def embed(
    model: Pipeline,
    texts: str | Sequence[str],
    *,
    batch_size: int = 32,
    recipe: Recipe | None = None,
    progress: bool | Any | None = None,
    workers: WorkerPool | None = None,
    normalize_embeddings: bool | None = None,
    show_progress_bar: bool | None = None,
    convert_to_numpy: bool = True,
    convert_to_tensor: bool = False,
    device: str | None = None,
    output_value: str | None = "sentence_embedding",
    **choices,
) -> np.ndarray | list[np.ndarray]:
    """Sentence vectors of many texts: (n, dim) float32 in the input order, (dim,) for one string.

    The recipe is `recipe`, else `model.recipe(**choices)`: pooling, layers, combine, normalize,
    max_length, long, stride, prompt, prompt_name, dimensions (or truncate_dim), precision, ranges,
    calibration_embeddings (numbert.pipeline.recipe.build). precision="int8", "uint8", "binary" or "ubinary" gives
    quantize_embeddings' arrays (numbert.pipeline.quantization); int8 and uint8 without ranges are scaled by the min and
    max of this call's vectors, as SentenceTransformer.encode(precision=...) does. Its defaults
    are, for a sentence-transformers directory, its own recipe (its pooling of the last layer, its
    Dense layers and Normalize, max_seq_length and lowercasing, its default prompt), so the vectors
    are SentenceTransformer.encode's; for a plain BERT the mean of the second-to-last layer,
    bert-as-service's default. Batching, truncation and long texts as in `batches`. A progress bar
    (tqdm, on stderr) shows once the job has run 2 s; progress=True shows it at once, progress=False
    never; or pass a tqdm bar of your own, which each batch advances (one bar over several calls).
    workers: a numbert.engines.workers.Pool, which runs the planned batches in its processes: the same
    vectors, bit for bit, as this process gives with the BLAS threads of one worker. It pays for a
    corpus, on more than one core: workers of one BLAS thread each embed faster than one process of as
    many BLAS threads, and keep their pace on a machine other programs load (docs/performance.md).
    Starting a pool takes a while, so for one call it pays past a few thousand texts; keep one Pool
    for many calls. `numbert encode --file` uses workers from 5,000 lines.

    sentence-transformers' names work too: `normalize_embeddings=True` is normalize=True (False
    leaves the model's own recipe, as there: a Normalize module still normalizes),
    `show_progress_bar` is `progress`, and `convert_to_numpy=False` gives a list of (dim,) arrays;
    convert_to_tensor=True, a device other than the CPU and output_value other than sentence_embedding are
    refused with what to do instead (numbert has no torch and runs on the CPU).
    """
    sentence_transformers_only(convert_to_tensor, device, output_value)
    if normalize_embeddings is not None:
        if "normalize" in choices:
            raise TypeError("got both normalize and sentence-transformers' normalize_embeddings; pass one")
        choices["normalize"] = True if normalize_embeddings else None
    if isinstance(workers, int):
        raise TypeError(
            "workers takes a numbert.engines.workers.Pool (the engine lives above the model): "
            "numbert.engines.workers.embed(model, texts, workers=N) starts one for a call"
        )
    if recipe is None:
        recipe = model.recipe(**choices)
    elif choices:
        raise TypeError(f"pass recipe= or its choices ({', '.join(choices)}), not both")
    progress = alias(progress, show_progress_bar, "progress", "show_progress_bar")
    single = isinstance(texts, str)
    texts = text_list([texts] if single else texts)
    vectors = np.empty((len(texts), recipe.width), np.float32)
    planned = model.inputs.plan(texts, None, recipe, batch_size)
    side = blas.batches_at_once() if len(texts) > batch_size else 1  # batches side by side where there are several
    with progress_bar(progress, len(texts)) as bar:
        for positions, pooled in run_planned(model, planned, recipe, batch_size, workers, side):
            vectors[positions] = pooled
            bar.update(len(positions))
    vectors = recipe.finish(vectors)
    if single:
        return vectors[0]
    return vectors if convert_to_numpy else list(vectors)


def batches(
    model: Pipeline,
    texts: Sequence[str],
    text_pair: Sequence[str | None] | None = None,
    *,
    batch_size: int = 32,
    max_length: int | None = None,
    long: str = "truncate",
    stride: int | None = None,
    truncation_side: str | None = None,
    pairs: Sequence[str | None] | None = None,
    one_token: str | None = None,
) -> Iterator[tuple[list[int], Output]]:
    """Run many texts, yielding (positions in `texts`, Output) batch by batch, longest texts first.

    Planned by numbert.pipeline.planner (`Inputs.plan`): texts are taken longest first by character count and
    tokenized LOOK_AHEAD batches at a time; within those, sorted by token count and batched with their
    neighbours, so a batch is padded only to its own longest text, and memory does not grow with the number of
    texts. Inputs longer than max_length tokens (default: a sentence-transformers max_seq_length, else the
    model's positions) are cut (long="truncate"; only the tokens kept are tokenized; at their start with
    truncation_side="left", default the tokenizer's), or, with long="window", run alone as windows, their Output
    then having no batch axis. A sentence-transformers model with do_lower_case sees lowercased text, as in
    sentence-transformers. `pairs` is an older name of `text_pair`. one_token: each Output's last layer for
    one token a row, "first" for a reader of [CLS], "last" for a reader of the last real token (`Encoder.forward`).
    """
    text_pair = alias(text_pair, pairs, "text_pair", "pairs")
    shape = model.recipe(  # lengths, lowercasing
        pooling="mean", max_length=max_length, long=long, stride=stride, truncation_side=truncation_side
    )
    lower = str.lower if shape.lowercase else str
    pad = model.require_tokenizer().pad_token or ""
    for positions, encodings in model.inputs.plan(texts, text_pair, shape, batch_size, prepare=lower):
        rows = [row_of(e) for e in encodings]
        out = model.runner.run(
            rows, one_token=one_token, limit=shape.max_length, stride=shape.stride, window_batch=batch_size
        )
        yield positions, with_tokens(out, encodings, pad)


def windowed(
    model: Pipeline, text: str, *, stride: int | None = None, max_length: int | None = None, batch_size: int = 32
) -> Output:
    """Run a text of any length as overlapping windows and stitch them into one Output (`Runner.windows`).

    Windows of max_length tokens (default: the model's positions, or a sentence-transformers
    max_seq_length), [CLS] and [SEP] included, share `stride` tokens with their neighbour (default: 128, or half a
    window that holds no more); each
    token's hidden states are the average over the windows that contain it, so every token of a
    long document gets a vector. seq may exceed 512; pooler_output pools the averaged [CLS].
    """
    if not isinstance(text, str):
        raise TypeError(f"windowed takes one text (str), not {type(text).__name__}")
    planner.positive("batch_size", batch_size)
    encoding = model.require_tokenizer().encode(text, max_length=None, truncation=False)
    size = model.inputs.window_size(max_length)
    return with_tokens(model.runner.windows(row_of(encoding), size, stride, batch_size), [encoding], "")


def sentence_transformers_only(convert_to_tensor: bool, device: str | None, output_value: str | None) -> None:
    """A TypeError or ValueError for SentenceTransformer.encode's options that numbert cannot honour, saying what
    to do instead."""
    if convert_to_tensor:
        raise TypeError(
            "convert_to_tensor=True: numbert has no torch and returns NumPy arrays; "
            "torch.from_numpy(vectors) makes a tensor of them"
        )
    if device not in (None, "cpu"):
        raise ValueError(f"device={device!r}: numbert runs on the CPU (device='cpu' or None)")
    if output_value not in (None, "sentence_embedding"):
        raise ValueError(
            f"output_value={output_value!r}: embed gives sentence vectors; a text's token vectors are "
            f"model(text).last_hidden_state, its words' model.word_vectors(text)"
        )


def run_planned(
    model: Pipeline,
    planned: Iterable[tuple[list[int], list[Encoding]]],
    recipe: Recipe,
    batch_size: int,
    workers: WorkerPool | None = None,
    side_by_side: int = 1,
) -> Iterator[tuple[list[int], np.ndarray]]:
    """(positions, their pooled vectors before `recipe.finish`) of each planned batch: run here, `side_by_side`
    batches at once (numbert.runtime.side_by_side: the bits of one BLAS thread), or by `workers` (a WorkerPool),
    which receive the batches' rows and run them as this process would."""
    if workers is None:

        def run_one(batch: tuple[list[int], list[Encoding]]) -> tuple[list[int], np.ndarray]:
            positions, encodings = batch
            return positions, model.runner.recipe_vectors([row_of(e) for e in encodings], recipe, batch_size)

        yield from in_order(run_one, planned, side_by_side)
        return
    batches = ((positions, [row_of(e) for e in encodings]) for positions, encodings in planned)
    for done, pooled in workers.map(recipe, batches, batch_size):
        yield list(done), pooled


def encode(
    model: Pipeline,
    sentences: str | Sequence[str],
    batch_size: int = 32,
    show_progress_bar: bool | None = None,
    convert_to_numpy: bool = True,
    normalize_embeddings: bool = False,
    **options,
) -> np.ndarray | list[np.ndarray]:
    """Sentence vectors, as `SentenceTransformer.encode` is called: `embed` under its names.

    Not to be confused with the module function `numbert.encode(text)`, which returns the whole
    Output (hidden states, pooler output) of one forward pass. Other keyword arguments go to `embed`.
    """
    return embed(
        model,
        sentences,
        batch_size=batch_size,
        show_progress_bar=show_progress_bar,
        convert_to_numpy=convert_to_numpy,
        normalize_embeddings=normalize_embeddings,
        **options,
    )


PROMPT_NAMES = {"query": ("query", "search_query"), "document": ("document", "search_document")}  # role -> names


def encode_query(model: Pipeline, sentences: str | Sequence[str], **options) -> np.ndarray | list[np.ndarray]:
    """encode with the model's "query" prompt (nomic's "search_query"), as SentenceTransformer.encode_query;
    none when its config has neither. A prompt or prompt_name given wins."""
    return encode(model, sentences, **role_prompt(model, "query", options))


def encode_document(model: Pipeline, sentences: str | Sequence[str], **options) -> np.ndarray | list[np.ndarray]:
    """encode with the model's "document" prompt (nomic's "search_document"), as SentenceTransformer.encode_document;
    none when its config has neither. A prompt or prompt_name given wins."""
    return encode(model, sentences, **role_prompt(model, "document", options))


def role_prompt(model: Pipeline, role: str, options: dict) -> dict:
    """`options` with prompt_name set to the model's prompt for `role` ("query", "document"), if it has one and
    the caller chose no prompt."""
    if options.get("prompt") is not None or options.get("prompt_name") is not None:
        return options
    prompts = model.sentence_config.prompts if model.sentence_config is not None else {}
    name = next((n for n in PROMPT_NAMES[role] if n in prompts), None)
    return options if name is None else {**options, "prompt_name": name}


def get_embedding_dimension(model: Pipeline) -> int:
    """The width of the model's sentence vectors (after its Dense layers), as SentenceTransformer's
    get_embedding_dimension (get_sentence_embedding_dimension before sentence-transformers 6)."""
    return model.recipe().dim


# --- words and similarity ------------------------------------------------------------------------


def word_vectors(
    model: Pipeline,
    text: str,
    *,
    layers: str | int | Sequence[int] = "sum_last_four",
    combine: str | None = None,
    merge: str = "mean",
    long: str = "truncate",
    stride: int | None = None,
) -> list[pooling.Word]:
    """The words of `text`, each with its character span and the merged vector of its pieces.

    >>> [(w.text, w.span) for w in model.word_vectors("Embeddings, please")]
    [('Embeddings', (0, 10)), (',', (10, 11)), ('please', (12, 18))]
    """
    if not isinstance(text, str):
        raise TypeError(f"word_vectors takes one text (str), not {type(text).__name__}")
    check_long(long)
    out = windowed(model, text, stride=stride) if long == "window" else model(text)
    assert out.encodings is not None  # a call on text keeps its encodings
    return pooling.word_vectors(out.token_vectors(layers, combine), out.encodings[0], (text,), merge)


def similarity(model: Pipeline, a: str | np.ndarray, b: str | np.ndarray, **options) -> float | np.ndarray:
    """Cosine similarities, as SentenceTransformer.similarity: of two arrays of embeddings ((n, dim) and
    (m, dim), or one vector each) the (n, m) float32 matrix; of two texts, the float of their sentence vectors
    (embedded with `options`, as for embed)."""
    if isinstance(a, str) and isinstance(b, str):
        u, v = embed(model, [a, b], **options)
        return float(pooling.cosine(u, v))
    if isinstance(a, str) or isinstance(b, str):
        raise TypeError("similarity takes two texts (str) or two arrays of embeddings, not one of each")
    if options:
        raise TypeError(f"similarity of embeddings takes no options ({', '.join(options)}): they are embedded already")
    u, v = embeddings_array(a, "a"), embeddings_array(b, "b")
    if u.ndim != 2 or v.ndim != 2 or u.shape[1] != v.shape[1]:
        raise ValueError(f"similarity takes embeddings of one width, (n, dim) and (m, dim), not {u.shape}, {v.shape}")
    return pooling.cosine_matrix(u, v)


def embeddings_array(value, name: str) -> np.ndarray:
    """`value` as float32 embeddings, at least 2-D, or a TypeError naming `name` (None, text, objects)."""
    given = np.asarray(value)
    if given.dtype.kind not in "biuf":
        raise TypeError(
            f"similarity's {name} must be embeddings (numbers), not {type(value).__name__} of {given.dtype}"
        )
    return np.atleast_2d(given.astype(np.float32, copy=False))


def progress_bar(progress: bool | Any | None, total: int) -> contextlib.AbstractContextManager:
    """A tqdm bar over `total` texts (shown after 2 s; progress=True at once, False never), or the caller's own
    bar (`progress` is a tqdm bar: it is advanced, not closed)."""
    if progress is None or isinstance(progress, bool):
        from tqdm.auto import tqdm

        delay = 0 if progress else 2
        widget = any("notebook" in kind.__module__ for kind in tqdm.__mro__)  # Jupyter's: drawn in place
        if progress is False or widget or sys.stderr.isatty():
            return tqdm(total=total, unit="text", disable=progress is False, delay=delay)
        return final_line(tqdm(total=total, unit="text", delay=float("inf")), delay)
    return contextlib.nullcontext(progress)


@contextlib.contextmanager
def final_line(bar: Any, delay: float) -> Iterator[Any]:
    """Off a terminal (a log file, a pipe) each redraw of a bar would be a line of its own: the bar drawn once, when
    it is done, if it ran `delay` seconds."""
    with bar:
        yield bar
    if bar.format_dict["elapsed"] >= delay:
        print(bar, file=sys.stderr, flush=True)
