"""The sentence recipe: one frozen value saying how a text becomes one sentence vector.

    recipe = model.recipe()                        # the model's own (a sentence-transformers directory's
    recipe = model.recipe(pooling="cls", layers=-1)  # modules), or bert-as-service's mean of layer -2
    recipe.prepare("a text")                       # the text as it is tokenized: prompt + text, lowercased
    recipe.sentence_vectors(out)                   # a forward's Output -> (rows, width): pool, then Dense
    recipe.finish(vectors)                         # normalize, keep the first `dimensions`, quantize

A recipe is built once from the model's sentence-transformers config plus the caller's overrides and
checked then (pooling names, layer indices, prompt names, lengths), so everything that runs it (embed,
the command line, the server, worker processes, Dask, shards) runs the same recipe and reads nothing
else of the model. It knows its output width (`dim`), pickles (worker processes get it whole) and
describes itself as JSON (`describe()`, for a job's manifest).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..checkpoint.sentence_config import Dense, SentenceConfig
from ..model.config import BertConfig
from ..model.encoder import ONE_TOKEN_POOLINGS, Output
from ..model.pooling import POOLINGS, Layers, layer_selection, normalize, sentence_vectors
from ..model.windows import stride_or_default, window_spans
from ..tokenizer.truncation import check_side
from . import quantization

LAYER_INDEX_BOUND = 1 << 20  # any layer index a recipe holds is within it (checked against the model when built)


@dataclass(frozen=True)
class Recipe:
    """pooling over `layers` (combined by `combine`) -> Dense layers -> L2 normalize -> first `dimensions`
    -> `precision`.

    pooling: numbert pooling names, concatenated in order (POOLINGS).
    layers / combine: the hidden states pooled (layer_selection).
    max_length: tokens per input, [CLS] and [SEP] included; a longer text is cut (long="truncate") at its
        end, or at its start if `truncation_side` is "left" (its last tokens kept), or runs as overlapping
        windows sharing `stride` tokens (long="window", numbert.model.windows).
    width: the width of the pooled vectors after the Dense layers.
    dense: sentence-transformers Dense modules, applied in order to the pooled vector.
    prompt: text prepended to every input; lowercase: the input is lowercased first (do_lower_case).
    dimensions: keep the first `dimensions` values (Matryoshka); renormalized when `normalize`. With
        matryoshka "layer_norm" (nomic-embed-text-v1.5's rule, its model card's): a LayerNorm without weights over
        the whole vector first, then the cut, then always the L2 normalization.
    task: jina-embeddings-v3's task adapter the encoder runs (numbert.model.encoder.Encoder.adapted), or None.
    precision: float32, or quantized for an index (numbert.pipeline.quantization): int8 and uint8 scaled by `ranges`
        ((2, dim): each dimension's minimum and maximum), else by the min and max of the vectors finished
        together (embed: the whole call's); binary and ubinary pack the signs eight to a byte.
    """

    pooling: tuple[str, ...]
    layers: Layers
    combine: str | None
    max_length: int
    width: int
    dense: tuple[Dense, ...] = field(default=(), repr=False)
    normalize: bool = False
    prompt: str = ""
    lowercase: bool = False
    dimensions: int | None = None
    long: str = "truncate"
    stride: int = 128
    truncation_side: str = "right"
    precision: str = "float32"
    ranges: np.ndarray | None = field(default=None, repr=False, compare=False)
    matryoshka: str = "cut"  # how `dimensions` cuts: "cut", or "layer_norm" first (NomicBERT)
    task: str | None = None

    @property
    def dim(self) -> int:
        """The width of the vectors `finish` returns (bytes of bits for binary and ubinary)."""
        return quantization.width(self.width if self.dimensions is None else self.dimensions, self.precision)

    @property
    def one_token(self) -> str | None:
        """The one token a row its vectors read, "first" ("cls", "pooler") or "last" ("sep": the last real one), else
        None: the forward's last layer can compute that token only (`Encoder.forward`'s one_token)."""
        return next((token for token, poolings in ONE_TOKEN_POOLINGS.items() if set(self.pooling) <= poolings), None)

    @property
    def last_layers(self) -> int | None:
        """How many of the last hidden states its vectors read (a long text's windows stitch only those: the
        planner's run_windows), or None for every one (a layer counted from the embeddings up)."""
        indices, _ = layer_selection(self.layers, self.combine, LAYER_INDEX_BOUND)
        return None if any(i >= 0 for i in indices) else max(-i for i in indices)

    def prepare(self, text: str) -> str:
        """The text as the tokenizer sees it: the prompt prepended, lowercased if the model says do_lower_case."""
        text = self.prompt + text
        return text.lower() if self.lowercase else text

    def sentence_vectors(self, out: Output) -> np.ndarray:
        """A forward's sentence vectors before `finish`: pooled, then through the Dense layers. ([rows,] width)"""
        vectors = out.sentence_vector(self.pooling, self.layers, self.combine)
        for layer in self.dense:
            vectors = layer(vectors)
        return vectors

    def finish(self, vectors: np.ndarray) -> np.ndarray:
        """Pooled vectors as answered: L2-normalized if `normalize`; cut to `dimensions` (and normalized again);
        quantized to `precision`, all the rows together. ([rows,] width) float32 -> ([rows,] dim)"""
        if self.dimensions is not None and self.matryoshka == "layer_norm":  # nomic-embed-text-v1.5's model card
            vectors = normalize(plain_layer_norm(vectors)[..., : self.dimensions])
            return quantization.quantize(vectors, self.precision, self.ranges)
        if self.normalize:
            vectors = normalize(vectors)
        if self.dimensions is not None:
            vectors = vectors[..., : self.dimensions]
            if self.normalize:
                vectors = normalize(vectors)
        return quantization.quantize(vectors, self.precision, self.ranges)

    def with_output(
        self, *, normalize: bool | None = None, dimensions: int | None = None, precision: str | None = None
    ) -> Recipe:
        """The same recipe with another normalization, number of dimensions or precision (None keeps this
        recipe's; another precision drops the ranges)."""
        if dimensions is not None:
            check_dimensions(dimensions, self.width)
        if precision is not None:
            quantization.check_precision(precision)
        return dataclasses.replace(
            self,
            normalize=self.normalize if normalize is None else normalize,
            dimensions=self.dimensions if dimensions is None else dimensions,
            precision=self.precision if precision is None else precision,
            ranges=self.ranges if precision in (None, self.precision) else None,
        )

    def describe(self) -> dict:
        """The recipe as JSON values (Dense layers by shape and activation), for a job's manifest and logs. A setting
        at its default (right truncation, float32, the plain Matryoshka cut, no task) is left out, so a manifest
        written before the setting existed still matches."""
        ranges = None if self.ranges is None else self.ranges.tolist()
        return {
            "pooling": list(self.pooling),
            "layers": self.layers if isinstance(self.layers, (str, int)) else list(self.layers),
            "combine": self.combine,
            "dense": [{"shape": list(d.weight.shape), "activation": d.activation} for d in self.dense],
            "normalize": self.normalize,
            "prompt": self.prompt,
            "lowercase": self.lowercase,
            "max_length": self.max_length,
            "dimensions": self.dimensions,
            "long": self.long,
            "stride": self.stride,
            **({} if self.truncation_side == "right" else {"truncation_side": self.truncation_side}),
            **({} if self.precision == "float32" else {"precision": self.precision, "ranges": ranges}),
            **({} if self.matryoshka == "cut" else {"matryoshka": self.matryoshka}),
            **({} if self.task is None else {"task": self.task}),
        }


def build(
    config: BertConfig,
    sentence_config: SentenceConfig | None,
    has_pooler: bool,
    *,
    pooling: str | Sequence[str] | None = None,
    layers: Layers | None = None,
    combine: str | None = None,
    normalize: bool | None = None,
    prompt: str | None = None,
    prompt_name: str | None = None,
    max_length: int | None = None,
    dimensions: int | None = None,
    long: str = "truncate",
    stride: int | None = None,
    truncation_side: str = "right",
    truncate_dim: int | None = None,
    precision: str = "float32",
    ranges: np.ndarray | None = None,
    calibration_embeddings: np.ndarray | None = None,
    task: str | None = None,
) -> Recipe:
    """The recipe of a model (its config, its sentence-transformers config if any) with the caller's choices.

    Unset choices take the model's own: for a sentence-transformers model its pooling of the last
    layer, its Dense layers (unless a pooling is chosen), its Normalize, max_seq_length, do_lower_case
    and default prompt; for a plain BERT the mean of the second-to-last layer (bert-as-service's default)
    over all its positions. `truncate_dim` is sentence-transformers' name for `dimensions`. int8 and uint8
    take their `ranges` as given, or from `calibration_embeddings` (their min and max), or else from the
    vectors each `finish` quantizes. `task` chooses jina-embeddings-v3's task adapter and, unless a prompt is
    chosen, prepends its task instruction (as its own encode does). Every choice is checked here, with an error
    naming it.
    """
    st = sentence_config
    check_own_recipe(st, pooling, prompt, prompt_name)
    dense = st.dense if st is not None and pooling is None else ()  # a chosen pooling skips the model's Dense
    poolings, layers = chosen_pooling(st, pooling), chosen_layers(st, layers)
    width = dense[-1].weight.shape[0] if dense else pooled_width(config, has_pooler, poolings, layers, combine)
    dimensions = chosen_dimensions(config, width, dimensions, truncate_dim)
    check_task(config, task)
    if task is not None and prompt is None and prompt_name is None:
        prompt = dict(config.task_instructions).get(task)
    quantization.check_precision(precision)
    ranges = output_ranges(precision, ranges, calibration_embeddings, width if dimensions is None else dimensions)
    max_length = tokens_per_input(config, st, max_length)
    check_long(long)
    check_side(truncation_side)
    stride = stride_or_default(stride, max_length - 2)  # the content of a window: [CLS] and [SEP] aside
    if long == "window":
        window_spans(0, max_length - 2, stride)  # a bad stride fails now, not at the first long text
    return Recipe(
        pooling=poolings,
        layers=layers,
        combine=combine,
        max_length=max_length,
        width=width,
        dense=dense,
        normalize=(st is not None and st.normalize) if normalize is None else bool(normalize),
        prompt=st.prompt(prompt, prompt_name) if st is not None else (prompt or ""),
        lowercase=st is not None and st.do_lower_case,
        dimensions=dimensions,
        long=long,
        stride=stride,
        truncation_side=truncation_side,
        precision=precision,
        ranges=ranges,
        matryoshka="layer_norm" if config.model_type == "nomic_bert" else "cut",
        task=task,
    )


def check_own_recipe(
    st: SentenceConfig | None, pooling: str | Sequence[str] | None, prompt: str | None, prompt_name: str | None
) -> None:
    """A ValueError where the model's own recipe is asked for (no pooling chosen) and numbert cannot run it, or a
    prompt is not a str, or a prompt_name is given to a model without prompts."""
    if st is not None and pooling is None and st.unsupported:
        raise ValueError(
            f"this sentence-transformers model has modules numbert does not run "
            f"({', '.join(st.unsupported)}), so its own sentence vectors cannot be computed; "
            f"pass pooling=... (and layers=...) to pool BERT's token vectors yourself"
        )
    if st is not None and pooling is None and st.splade is not None:
        raise ValueError(
            "this is a SparseEncoder (SPLADE) model: its vectors are sparse, over the vocabulary "
            "(model.embed_sparse(texts)); pass pooling=... to pool BERT's token vectors yourself"
        )
    for name, value in (("prompt", prompt), ("prompt_name", prompt_name)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if st is None and prompt_name is not None:
        raise ValueError("prompt_name needs a sentence-transformers model with prompts; pass prompt= instead")


def chosen_pooling(st: SentenceConfig | None, pooling: str | Sequence[str] | None) -> tuple[str, ...]:
    """The pooling names: the chosen ones, else the sentence-transformers model's, else the mean."""
    if pooling is None:
        pooling = st.pooling if st is not None else ("mean",)
    if not isinstance(pooling, (str, Sequence)):
        raise TypeError(f"pooling must be a name or a list of names ({', '.join(POOLINGS)}), not {pooling!r:.40}")
    return (pooling,) if isinstance(pooling, str) else tuple(pooling)


def chosen_layers(st: SentenceConfig | None, layers: Layers | None) -> Layers:
    """The layers pooled: the chosen ones (a list frozen to a tuple), else the last for a sentence-transformers
    model, else the second-to-last (bert-as-service's)."""
    if layers is None:
        layers = -1 if st is not None else -2
    elif isinstance(layers, Sequence) and not isinstance(layers, (str, bytes)):
        layers = tuple(layers)  # a list of indices, frozen
    elif not isinstance(layers, (str, int, np.integer)):
        raise TypeError(f"layers must be a strategy name, an int or a list of ints, not {type(layers).__name__}")
    return layers


def chosen_dimensions(config: BertConfig, width: int, dimensions: int | None, truncate_dim: int | None) -> int | None:
    """The dimensions kept of `width` (`truncate_dim`: sentence-transformers' name), checked, and one the model was
    trained to be cut to if it names them (matryoshka_dimensions); None: all."""
    if truncate_dim is not None:
        if dimensions is not None:
            raise TypeError("got both dimensions and sentence-transformers' truncate_dim; pass one")
        check_dimensions(truncate_dim, width, "truncate_dim")
        dimensions = truncate_dim
    elif dimensions is not None:
        check_dimensions(dimensions, width)
    if dimensions is not None and config.matryoshka_dimensions and dimensions not in config.matryoshka_dimensions:
        raise ValueError(
            f"dimensions {dimensions} is not one this model was trained to be cut to: "
            f"{', '.join(map(str, config.matryoshka_dimensions))}"
        )
    return dimensions


def plain_layer_norm(vectors: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """A LayerNorm without weights over each whole vector, as torch.nn.functional.layer_norm with its default eps."""
    centered = vectors - vectors.mean(axis=-1, keepdims=True)
    return (centered / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + np.float32(eps))).astype(np.float32)


def check_task(config: BertConfig, task: str | None) -> None:
    """A task is one of the model's task adapters (jina-embeddings-v3); a model without them takes none."""
    if task is not None and task not in config.task_adapters:
        tasks = ", ".join(config.task_adapters) or "none (it has no task adapters)"
        raise ValueError(f"unknown task {task!r}; this model's tasks are {tasks}")


CHOICES = tuple(inspect.signature(build).parameters)[3:]  # the keyword arguments a recipe is built with


def output_ranges(
    precision: str, ranges: np.ndarray | None, calibration_embeddings: np.ndarray | None, dim: int
) -> np.ndarray | None:
    """The int8/uint8 ranges fixed in advance, (2, dim) float32: `ranges`, else the min and max of
    `calibration_embeddings` (rows, dim), else None (each `finish` calibrates on its own vectors)."""
    if calibration_embeddings is not None:
        if ranges is not None:
            raise ValueError("pass ranges or calibration_embeddings, not both")
        calibration_embeddings = np.asarray(calibration_embeddings, dtype=np.float32)
        if calibration_embeddings.ndim != 2 or calibration_embeddings.shape[1] != dim:
            raise ValueError(
                f"calibration_embeddings must be (rows, {dim}) vectors, got shape {calibration_embeddings.shape}"
            )
        ranges = quantization.calibration_ranges(calibration_embeddings)
    return None if ranges is None else quantization.check_ranges(ranges, precision, dim)


def pooled_width(
    config: BertConfig, has_pooler: bool, pooling: tuple[str, ...], layers: Layers, combine: str | None
) -> int:
    """The width of a pooled vector, found by pooling one zero token (which checks the choices too)."""
    zeros = np.zeros((config.num_hidden_layers + 1, 1, 1, config.hidden_size), np.float32)
    pooled = np.zeros((1, config.hidden_size), np.float32) if has_pooler else None
    return sentence_vectors(zeros, np.ones((1, 1), np.int64), pooling, layers, combine, pooled).shape[-1]


def tokens_per_input(config: BertConfig, sentence_config: SentenceConfig | None, max_length: int | None) -> int:
    """Tokens per input, [CLS] and [SEP] included: the caller's, a sentence-transformers max_seq_length, or all
    the model's positions."""
    positions = config.max_tokens
    if max_length is None:
        st = sentence_config
        return min(st.max_seq_length or positions, positions) if st else positions
    if isinstance(max_length, bool) or not isinstance(max_length, int) or not 3 <= max_length <= positions:
        raise ValueError(f"max_length must be an integer between 3 and {positions}, got {max_length!r}")
    return max_length


def check_long(long: str) -> None:
    if long not in ("truncate", "window"):
        raise ValueError(f"long must be 'truncate' or 'window', got {long!r}")


def check_dimensions(dimensions: int, width: int, name: str = "dimensions") -> None:
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or not 1 <= dimensions <= width:
        raise ValueError(f"{name} must be an integer between 1 and the vectors' width {width}, got {dimensions!r}")
