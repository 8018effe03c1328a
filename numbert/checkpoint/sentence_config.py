"""What a sentence-transformers model directory says about turning token vectors into one sentence vector.

A sentence-transformers model is a BERT checkpoint plus a pipeline described in `modules.json`:

    [{"path": "",           "type": "sentence_transformers.models.Transformer"},   # BERT itself
     {"path": "1_Pooling",  "type": "sentence_transformers.models.Pooling"},       # token vectors -> one vector
     {"path": "2_Dense",    "type": "sentence_transformers.models.Dense"},         # optional: activation(W x + b)
     {"path": "3_Normalize","type": "sentence_transformers.models.Normalize"}]     # L2 normalisation

The Pooling module's `config.json` names its modes either by flags (`pooling_mode_mean_tokens`: true, ...)
or, since sentence-transformers 5, by one `pooling_mode` string or list; several modes are
concatenated. `sentence_bert_config.json` holds `max_seq_length` (inputs are cut to that many
tokens, [CLS] and [SEP] included; sentence-transformers 6 saves it as tokenizer_config.json's
`model_max_length` instead) and `do_lower_case` (lowercase the text before tokenizing).
The pooling always runs over the LAST layer's token vectors. A Dense module (`config.json`:
in_features, out_features, bias, activation_function; weights `linear.weight` (out, in) and
`linear.bias` in its own model.safetensors or pytorch_model.bin) maps the pooled vector, before
the Normalize. `config_sentence_transformers.json` may name prompts ({"query": "query: ", ...}),
texts prepended to the input, and a `default_prompt_name` used when the caller names none; a directory
saved by a CrossEncoder names there the `activation_fn` its scores go through
("torch.nn.modules.activation.Sigmoid"; numbert.pipeline.reranking reads it).

A directory saved by a SparseEncoder (SPLADE) lists an MLMTransformer (or, since sentence-transformers
5.4, a Transformer whose sentence_bert_config.json says `"transformer_task": "fill-mask"`): BERT with its
masked-LM head, followed by a SpladePooling module (`config.json`: pooling_strategy "max" or "sum",
activation_function "relu" or "log1p_relu"); its config_sentence_transformers.json may name
`max_active_dims`, the weights each sparse vector keeps (numbert.pipeline.sparse reads both).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import EllipsisType

import numpy as np

from ..model.config import clipped
from ..model.layers import gelu, relu
from .json_file import read_json, read_object, read_object_if_any
from .router import ENCODERS, Router, read_router
from .weights import Checkpoint

# sentence-transformers' pooling modes, in the order it concatenates flagged modes, and numbert's names.
POOLING_MODES = {
    "cls": "cls",
    "max": "max",
    "mean": "mean",
    "mean_sqrt_len_tokens": "mean_sqrt_len",
    "weightedmean": "weighted_mean",
    "lasttoken": "sep",
}
POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


# torch activations a Dense module names (activation_function: "torch.nn.modules.activation.Tanh"), in NumPy.
DENSE_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Identity": lambda x: x,
    "Tanh": np.tanh,
    "ReLU": relu,
    "GELU": gelu,
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}


@dataclass(frozen=True, eq=False)
class Dense:
    """A sentence-transformers Dense module: activation(x W^T + b), plus PyLate's residual (x itself, or x R^T when
    the widths differ) if it has one. (..., in) -> (..., out)"""

    weight: np.ndarray  # (out, in)
    bias: np.ndarray | None  # (out,)
    activation: str  # a key of DENSE_ACTIVATIONS
    residual: np.ndarray | bool = False  # PyLate's use_residual: True (x added), an (out, in) R, or False (none)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = x @ self.weight.T
        if self.bias is not None:
            y += self.bias
        y = DENSE_ACTIVATIONS[self.activation](y).astype(np.float32, copy=False)
        if self.residual is True:
            y = y + x
        elif self.residual is not False:
            y = y + x @ self.residual.T
        return y


TOKEN_MODULES = ("MultiVectorMask",)  # a multi-vector (ColBERT) model's modules beside its token-level Dense, Normalize
SPLADE_STRATEGIES = ("max", "sum")  # SpladePooling's pooling_strategy over the tokens
SPLADE_ACTIVATIONS = ("relu", "log1p_relu")  # its activation_function, before the log(1 + x)


@dataclass(frozen=True)
class SpladePooling:
    """A SparseEncoder's SpladePooling: per token log(1 + activation(MLM logits)), pooled over the tokens."""

    strategy: str = "max"  # one of SPLADE_STRATEGIES
    activation: str = "relu"  # one of SPLADE_ACTIVATIONS


@dataclass(frozen=True)
class SentenceConfig:
    """The sentence-transformers recipe of a model directory, in numbert's terms."""

    pooling: tuple[str, ...] = ("mean",)  # numbert pooling names, concatenated in this order
    normalize: bool = False  # a Normalize module follows the pooling
    max_seq_length: int | None = None  # tokens per input, [CLS] and [SEP] included
    do_lower_case: bool = False  # lowercase texts before tokenizing
    unsupported: tuple[str, ...] = ()  # modules numbert does not run (LayerNorm, ...), as "path (Type)"
    dense: tuple[Dense, ...] = field(default=(), compare=False)  # applied in order to the pooled vector
    prompts: Mapping[str, str] = field(default_factory=dict)  # prompt name -> text prepended to the input
    default_prompt_name: str | None = None
    activation_fn: str | None = None  # a CrossEncoder's score activation, as a dotted torch path
    splade: SpladePooling | None = None  # a SparseEncoder's SpladePooling: the model's vectors are sparse
    max_active_dims: int | None = None  # a SparseEncoder's weights kept per vector (None: all)
    router: Router | None = field(default=None, compare=False, repr=False)  # a Router: its routes
    similarity_fn_name: str | None = field(default=None, repr=False)  # as config_sentence_transformers.json names it

    def prompt(self, prompt: str | None, prompt_name: str | None) -> str:
        """The text to prepend: `prompt` itself, else the named prompt, else the default prompt, else none."""
        if prompt is not None:
            if prompt_name is not None:
                raise ValueError("pass prompt= or prompt_name=, not both")
            return prompt
        name = self.default_prompt_name if prompt_name is None else prompt_name
        if name is None:
            return ""
        if name not in self.prompts:
            known = ", ".join(repr(n) for n in self.prompts) or "none"
            raise ValueError(f"unknown prompt_name {name!r}; this model's prompts: {known}")
        return self.prompts[name]


def read_sentence_config(
    directory: str | Path, hidden_size: int | None = None, listed: Modules | EllipsisType = ...
) -> SentenceConfig | None:
    """The SentenceConfig of a sentence-transformers directory, or None for a plain BERT directory; given the
    encoder's `hidden_size`, its Dense modules are checked to read the pooled vector's width; given `listed`
    (what `listed_modules` read from its modules.json), modules.json is not read again."""
    directory = Path(directory)
    listed = listed_modules(directory) if listed is ... else listed
    modules = sentence_modules(directory, listed)
    if modules is None:
        return None
    pooling: tuple[str, ...] = ("mean",)
    normalize, unsupported, dense, splade = False, [], [], None
    for path, kind in modules:
        if kind in TOKEN_MODULES or (kind in ("Dense", "Normalize") and token_level(directory / path)):
            continue  # a multi-vector (ColBERT) model's: numbert.checkpoint.colbert_config reads them
        if kind == "LogitScore":
            continue  # a causal-LM reranker's score: numbert.checkpoint.logit_score reads it
        if kind == "Pooling":
            pooling_file = directory / path / "config.json"
            pooling = _pooling_modes(pooling_file)
            if not _flag(read_object_if_any(pooling_file), pooling_file, "include_prompt", True):
                unsupported.append(f"{path} (Pooling with include_prompt=false)")
        elif kind == "Normalize":
            normalize = True
        elif kind == "Dense" and not normalize:
            dense.append(read_dense(directory / path))
        elif kind == "SpladePooling":
            splade = _splade_pooling(directory / path / "config.json")
        elif kind not in ENCODERS:
            unsupported.append(f"{path or '.'} ({kind or 'unknown type'})")
    if hidden_size is not None:
        check_dense_chain(dense, hidden_size * len(pooling), directory / "modules.json")
    transformer = directory / next((path for path, kind in modules if kind in ENCODERS), "")  # its own settings
    settings_file = transformer / "sentence_bert_config.json"
    settings = read_object(settings_file) if settings_file.is_file() else {}
    max_seq_length = _max_seq_length(transformer, settings, settings_file)
    prompting = read_object_if_any(directory / "config_sentence_transformers.json")
    prompts, default_prompt_name = prompting.get("prompts") or {}, prompting.get("default_prompt_name")
    if not (isinstance(prompts, dict) and all(isinstance(v, str) for v in prompts.values())):
        raise ValueError(f"{directory / 'config_sentence_transformers.json'}: prompts must map names to texts")
    if default_prompt_name is not None and default_prompt_name not in prompts:
        raise ValueError(
            f"{directory / 'config_sentence_transformers.json'}: default_prompt_name "
            f"{default_prompt_name!r} is not one of its prompts"
        )
    max_active_dims = prompting.get("max_active_dims")
    if max_active_dims is not None and (
        isinstance(max_active_dims, bool) or not isinstance(max_active_dims, int) or max_active_dims < 1
    ):
        raise ValueError(
            f"{directory / 'config_sentence_transformers.json'}: max_active_dims must be a positive integer, "
            f"got {max_active_dims!r}"
        )
    return SentenceConfig(
        pooling,
        normalize,
        max_seq_length,
        _flag(settings, settings_file, "do_lower_case", False),
        tuple(unsupported),
        tuple(dense),
        prompts,
        default_prompt_name,
        _dotted_path(prompting.get("activation_fn"), directory / "config_sentence_transformers.json"),
        splade,
        max_active_dims,
        read_router(directory, listed or []),
        similarity if isinstance(similarity := prompting.get("similarity_fn_name"), str) else None,
    )


def _splade_pooling(config_file: Path) -> SpladePooling:
    """A SpladePooling module's settings; a setting numbert does not run is refused, naming it."""
    config = read_object_if_any(config_file)
    strategy, activation = config.get("pooling_strategy", "max"), config.get("activation_function", "relu")
    if strategy not in SPLADE_STRATEGIES:
        raise ValueError(
            f"{config_file}: unsupported pooling_strategy {strategy!r}; numbert runs {', '.join(SPLADE_STRATEGIES)}"
        )
    if activation not in SPLADE_ACTIVATIONS:
        raise ValueError(
            f"{config_file}: unsupported activation_function {activation!r}; "
            f"numbert runs {', '.join(SPLADE_ACTIVATIONS)}"
        )
    return SpladePooling(strategy, activation)


def _max_seq_length(directory: Path, settings: dict, settings_file: Path) -> int | None:
    """Tokens per input as sentence-transformers 6 decides them for its Transformer module: the
    `model_max_length` of the tokenizer arguments in sentence_bert_config.json (`processor_kwargs`, formerly
    `tokenizer_args`), else its `max_seq_length`, else tokenizer_config.json's `model_max_length` (where
    sentence-transformers 6 saves max_seq_length); None when none is set. (It caps the last at the model's
    positions, as the recipe caps them all.)"""
    candidates = [
        (f"{settings_file}: {field}.model_max_length", settings[field].get("model_max_length"))
        for field in ("processor_kwargs", "tokenizer_args")
        if isinstance(settings.get(field), dict)
    ]
    candidates.append((f"{settings_file}: max_seq_length", settings.get("max_seq_length")))
    tokenizer_file = directory / "tokenizer_config.json"
    candidates.append(
        (f"{tokenizer_file}: model_max_length", read_object_if_any(tokenizer_file).get("model_max_length"))
    )
    for name, value in candidates:
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ValueError(f"{name} must be an integer >= 2, got {value!r}")
            return value
    return None


def _dotted_path(value, source: Path) -> str | None:
    """An activation_fn as written (a dotted path such as "torch.nn.modules.activation.Sigmoid"), or None."""
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{source}: activation_fn must be a dotted path such as torch.nn.Sigmoid, got {value!r}")
    return value


Modules = list[tuple[str, str]] | None  # (path, type) of each module modules.json lists; None without one


def sentence_modules(directory: str | Path, listed: Modules | EllipsisType = ...) -> Modules:
    """(path, type) of each module a text goes through, the type's last part ("Pooling", "Dense", ...): those
    modules.json lists (`listed`, read here when not given), a Router's encoder route's in its place; None for a
    plain BERT directory (no modules.json)."""
    listed = listed_modules(directory) if listed is ... else listed
    router = None if listed is None else read_router(Path(directory), listed)
    return listed if router is None else router.modules()


def model_router(directory: str | Path) -> Router | None:
    """The Router of a sentence-transformers directory whose modules.json starts with one, else None."""
    listed = listed_modules(directory)
    return None if listed is None else read_router(Path(directory), listed)


def encoder_folder(directory: str | Path) -> Path:
    """Where a model directory's encoder is (weights, config.json, tokenizer): the directory itself, or for a Router
    its encoder route's transformer folder."""
    router = model_router(directory)
    return Path(directory) if router is None else Path(directory) / router.encoder_path


def recipe_directory(folder: str | Path) -> Path:
    """The directory whose modules.json describes the encoder in `folder`: `folder` itself, or the directory of the
    Router whose encoder route's transformer folder it is."""
    folder, parent = Path(folder), Path(folder).parent
    if not (folder / "modules.json").is_file() and (parent / "modules.json").is_file():
        router = model_router(parent)
        if router is not None and (parent / router.encoder_path).resolve() == folder.resolve():
            return parent
    return folder


def listed_modules(directory: str | Path) -> Modules:
    """(path, type) of each module modules.json lists; None without modules.json."""
    modules_file = Path(directory) / "modules.json"
    if not modules_file.is_file():
        return None
    modules = read_json(modules_file)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ValueError(f"{modules_file}: expected a list of modules, each an object with 'path' and 'type'")
    listed = []
    for module in modules:
        path = module.get("path", "")
        if not isinstance(path, str):
            raise ValueError(f"{modules_file}: a module's 'path' must be a string, got {clipped(path)}")
        check_module_path(modules_file, path)
        listed.append((path, str(module.get("type", "")).rsplit(".", 1)[-1]))
    return listed


def check_module_path(modules_file: Path, path: str) -> None:
    """A module's path names a folder inside the model directory ("" the directory itself): an absolute path, or
    one that leaves it by "..", or by a symlink, is refused (modules.json would read files from anywhere)."""
    directory = modules_file.parent.resolve()
    try:
        inside = not Path(path).is_absolute() and (directory / path).resolve().is_relative_to(directory)
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte
        inside = False
    if not inside:
        raise ValueError(
            f"{modules_file}: module path {clipped(path)} leaves the model directory; a module's path must be a "
            f"folder inside it (symlinks included)"
        )


def token_level(directory: Path) -> bool:
    """A module (Dense, Normalize) that works on each token's vector (a multi-vector model's), not the sentence
    vector: its config.json says module_input_name "token_embeddings", or PyLate's Dense (use_residual)."""
    config = read_object_if_any(directory / "config.json")
    return config.get("module_input_name") == "token_embeddings" or "use_residual" in config


def read_dense(directory: Path) -> Dense:
    """A Dense module's layer: its config.json and its weights (linear.weight (out, in), linear.bias; PyLate's
    residual.weight when use_residual joins vectors of two widths)."""
    config = read_object(directory / "config.json")
    activation = str(config.get("activation_function", "torch.nn.modules.activation.Tanh")).rsplit(".", 1)[-1]
    if activation not in DENSE_ACTIVATIONS:
        raise ValueError(
            f"{directory / 'config.json'}: unsupported activation_function "
            f"{config.get('activation_function')!r}; numbert runs {', '.join(DENSE_ACTIVATIONS)}"
        )
    shape = dense_shape(config, directory / "config.json")
    checkpoint = Checkpoint.find(directory)
    weights, source = checkpoint.read(), checkpoint.path
    weight, bias = weights.get("linear.weight"), weights.get("linear.bias")
    if weight is None or weight.shape != shape:
        raise ValueError(
            f"{source}: expected tensor 'linear.weight' of shape {shape}, "
            f"found {None if weight is None else weight.shape}"
        )
    has_bias = _flag(config, directory / "config.json", "bias", True)
    if has_bias and (bias is None or bias.shape != shape[:1]):
        raise ValueError(f"{source}: expected tensor 'linear.bias' of shape {shape[:1]}")
    as_float32 = lambda w: np.asarray(w, dtype=np.float32)
    residual: np.ndarray | bool = _flag(config, directory / "config.json", "use_residual", False)
    if residual and shape[0] != shape[1]:
        found = weights.get("residual.weight")
        if found is None or found.shape != shape:
            raise ValueError(
                f"{source}: use_residual joins {shape[1]} to {shape[0]} dimensions, so it needs tensor "
                f"'residual.weight' of shape {shape}; found {None if found is None else found.shape}"
            )
        residual = as_float32(found)
    for name in ("linear.weight", "linear.bias", "residual.weight"):
        if name in weights and (name != "residual.weight" or residual is not False):
            check_head_tensor(source, name, weights[name])
    return Dense(as_float32(weight), as_float32(bias) if has_bias else None, activation, residual)


MAX_FEATURES = 1 << 16  # a Dense module's widest in_features or out_features


def dense_shape(config: dict, source: Path) -> tuple[int, int]:
    """A Dense module's (out_features, in_features), each an integer from 1 to MAX_FEATURES."""
    for key in ("out_features", "in_features"):
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_FEATURES:
            raise ValueError(f"{source}: {key} must be an integer from 1 to {MAX_FEATURES}, got {clipped(value)}")
    return config["out_features"], config["in_features"]


def check_head_tensor(source: Path, name: str, tensor: np.ndarray) -> None:
    """A head's tensor (a Dense module's, BGE-M3's) holds finite floating-point numbers: an integer one (int8)
    is refused as the encoder refuses it, not widened; a NaN or infinite one, naming the first. Heads are small:
    the scan costs little."""
    if not np.issubdtype(tensor.dtype, np.floating):
        raise ValueError(f"{source}: tensor {name!r} has dtype {tensor.dtype}; head weights must be floating point")
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(tensor)
    if not finite.all():
        where = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise ValueError(
            f"{source}: tensor {name!r} holds NaN or infinite values (the first, {tensor[where]}, at index {where})"
        )


def check_dense_chain(dense: Sequence[Dense], width: int, source: Path) -> None:
    """Each Dense module reads the width the one before it writes, the first `width` (the pooled vector's, or the
    encoder's hidden size for token vectors): checked at load, not as a matmul error at the first encode."""
    for i, layer in enumerate(dense):
        out_features, in_features = layer.weight.shape
        if in_features != width:
            raise ValueError(
                f"{source}: Dense module {i + 1} reads {in_features} features (in_features), but what comes before "
                f"it gives {width}"
            )
        width = out_features


def _pooling_modes(config_file: Path) -> tuple[str, ...]:
    """The Pooling module's modes as numbert pooling names; sentence-transformers' default is mean."""
    if not config_file.is_file():
        return ("mean",)
    config = read_object(config_file)
    modes = config.get("pooling_mode")
    if modes is None:
        modes = [mode for flag, mode in POOLING_FLAGS.items() if _flag(config, config_file, flag, False)] or ["mean"]
    modes = [modes] if isinstance(modes, str) else modes
    if not (isinstance(modes, list) and all(isinstance(m, str) for m in modes)):
        raise ValueError(f"{config_file}: pooling_mode must be a string or a list of strings, got {modes!r}")
    unknown = [m for m in modes if m not in POOLING_MODES]
    if unknown:
        raise ValueError(
            f"{config_file}: unknown pooling mode {unknown[0]!r}; sentence-transformers defines "
            f"{', '.join(POOLING_MODES)}"
        )
    return tuple(POOLING_MODES[m] for m in modes)


def _flag(config: dict, path: Path, field: str, default: bool) -> bool:
    """A true/false field of a module's JSON file (`default` when absent); anything else names the file and field."""
    value = config.get(field, default)
    if not isinstance(value, bool):
        raise ValueError(f"{path}: {field} must be true or false, got {clipped(value)}")
    return value
