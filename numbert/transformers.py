"""numbert.transformers: the door for code written for transformers' BERT classes (and pytorch-pretrained-bert's).

The classic BERT embedding tutorials run with their import line changed and torch's array calls replaced by
NumPy's (`torch.tensor` -> `np.array`, `torch.stack` -> `np.stack`, `dim=` -> `axis=`, `permute` -> `transpose`,
`.size()` -> `.shape`, `torch.no_grad()` dropped):

    from numbert.transformers import BertTokenizer, BertModel

    tokenizer = BertTokenizer.from_pretrained("bert-base-uncased")
    model = BertModel.from_pretrained("bert-base-uncased", output_hidden_states=True).eval()
    ids = np.array([tokenizer.convert_tokens_to_ids(tokenizer.tokenize("[CLS] a bank [SEP]"))])
    hidden_states = model(ids)[2]                      # embeddings + 12 layers, each (batch, seq, hidden)
    outputs = model(**tokenizer(texts, return_tensors="np", padding=True))

Each class is a thin door over the one pipeline: `numbert.load` gives the `Bert` whose `forward` computes every
number, its tokenizer tokenizes, its masked-LM head scores. The door only reads the arguments and the answers in
transformers' shapes: positional arguments in transformers' order (input_ids, attention_mask, token_type_ids),
NumPy arrays (or lists) in and out, an output read by attribute, key, index and slice (`ModelOutput`), and
transformers 5's rule for `output_hidden_states`/`output_attentions` (the model's setting when the argument is
absent; an explicit None means no). Positions the attention mask hides get hidden states as in transformers
(`Pipeline.forward`'s every_position), so whole arrays compare, padding included.

pytorch-pretrained-bert's call, `encoded_layers, pooled = model(ids, segments)`, is `PytorchPretrainedBertModel`
(import it as BertModel), or any model's call with `output_all_encoded_layers=`: its arguments in its order
(input_ids, token_type_ids, attention_mask), the 12 layers' outputs as a list (no embedding output).

What needs torch (a GPU, half precision, training, `return_tensors="pt"`) answers in one line what to do instead.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from .pipeline import Bert, MaskedLMLogits, load
from .tokenizer import Tokenizer

UNSET: Any = object()  # an output_* argument left out: the model's own setting applies (transformers 5)
CPU = ("cpu",)  # the one device numbert runs on
LOAD_OPTIONS_IGNORED = ("attn_implementation", "low_cpu_mem_usage", "local_files_only", "trust_remote_code")
FLOAT32 = ("float32", "auto", None)  # the dtypes from_pretrained accepts: numbert computes in float32
TENSOR_TYPES = ("np", None)  # return_tensors numbert gives: NumPy arrays, or lists


class TorchOnly(NotImplementedError):
    """A call that needs torch (a GPU, half precision, gradients): its message names what to do instead."""


def torch_only(what: str, instead: str) -> TorchOnly:
    return TorchOnly(f"{what} needs torch; numbert runs NumPy on the CPU: {instead}")


def check_device(device: Any, what: str) -> None:
    """Accept the CPU (a str, or a torch.device whose str is "cpu"); refuse any other device in one line."""
    if str(device) not in CPU:
        raise torch_only(f"{what}({device!r})", "drop the call, numbert's arrays are already on the CPU")


# --- outputs ---------------------------------------------------------------------------------------------


class ModelOutput(dict):
    """transformers' ModelOutput: the fields that are set, in FIELDS order, read by attribute (None when unset),
    by key, by index or slice (of `to_tuple()`); iterating gives the keys, as an OrderedDict does."""

    FIELDS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **values: Any):
        unknown = set(values) - set(self.FIELDS)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        super().__init__((name, values[name]) for name in self.FIELDS if values.get(name) is not None)

    def __getattr__(self, name: str) -> Any:
        if name in self.FIELDS:
            return self.get(name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(key)
        return self.to_tuple()[key]

    def to_tuple(self) -> tuple:
        """The values that are set, in order (what `return_dict=False` returns)."""
        return tuple(self.values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={shape_of(v)}" for k, v in self.items())
        return f"{type(self).__name__}({shown})"


def shape_of(value: Any) -> str:
    """An array's shape, a tuple of arrays as its length and first shape: a ModelOutput's repr."""
    if isinstance(value, np.ndarray):
        return f"array{value.shape}"
    if isinstance(value, tuple):
        return f"({len(value)} x {shape_of(value[0])})" if value else "()"
    return repr(value)


class BaseModelOutputWithPoolingAndCrossAttentions(ModelOutput):
    """BertModel's output: last_hidden_state (batch, seq, hidden), pooler_output (batch, hidden) or None without a
    pooler, hidden_states (the embedding output and each layer's, each (batch, seq, hidden)) and attentions (each
    layer's, (batch, heads, seq, seq)) when asked; cross_attentions, () with attentions (an encoder has none)."""

    FIELDS = (
        "last_hidden_state",
        "pooler_output",
        "hidden_states",
        "past_key_values",
        "attentions",
        "cross_attentions",
    )


class MaskedLMOutput(ModelOutput):
    """BertForMaskedLM's output: logits (batch, seq, vocab), with hidden_states and attentions when asked."""

    FIELDS = ("loss", "logits", "hidden_states", "attentions")


# --- the tokenizer ---------------------------------------------------------------------------------------


class BatchEncoding(dict):
    """The tokenizer's answer: input_ids, token_type_ids, attention_mask (...), read by key or attribute;
    `model(**encoding)` takes it whole."""

    def __getattr__(self, name: str) -> Any:
        if name in self:
            return self[name]
        raise AttributeError(f"BatchEncoding has no field {name!r}; it holds {', '.join(self)}")

    def to(self, device: Any) -> BatchEncoding:
        """Itself, for the CPU; other devices need torch."""
        check_device(device, "BatchEncoding.to")
        return self


class BertTokenizer:
    """transformers' BertTokenizer over numbert's Tokenizer (the same tokens and ids as transformers' Rust one)."""

    def __init__(self, tokenizer: Tokenizer, name_or_path: str = ""):
        self.tokenizer = tokenizer
        self.name_or_path = name_or_path

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike,
        *,
        revision: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        use_fast: bool = True,
        **options: Any,
    ) -> BertTokenizer:
        """The tokenizer of a model directory or hub id (vocab.txt, else tokenizer.json, with tokenizer_config.json's
        options). `use_fast` is accepted: numbert has one tokenizer, equal to the fast one."""
        refuse_options(options, "BertTokenizer.from_pretrained")
        return cls(Tokenizer.from_pretrained(name_or_path, revision=revision, cache_dir=cache_dir), str(name_or_path))

    # --- the vocabulary -------------------------------------------------------------------------------------

    @property
    def vocab(self) -> dict[str, int]:
        """Token -> id, a new dict in id order (as the tutorials print `list(tokenizer.vocab.keys())[5000:5020]`)."""
        return dict(self.tokenizer.vocab)

    def get_vocab(self) -> dict[str, int]:
        return self.vocab

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def __len__(self) -> int:
        return self.tokenizer.vocab_size + len(self.tokenizer.appended)

    @property
    def model_max_length(self) -> int | None:
        return self.tokenizer.model_max_length

    def __getattr__(self, name: str) -> Any:
        """The special tokens and their ids (cls_token, sep_token_id, pad_token, mask_token_id, ...)."""
        if name.removesuffix("_id") in ("cls_token", "sep_token", "pad_token", "unk_token", "mask_token"):
            return getattr(self.tokenizer, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    # --- text to tokens and ids -----------------------------------------------------------------------------

    def tokenize(self, text: str, add_special_tokens: bool = False) -> list[str]:
        """The tokens of `text`; special tokens written in it ("[CLS] " + text + " [SEP]") stay whole."""
        if add_special_tokens:
            return list(self.tokenizer.encode(text).tokens)
        return self.tokenizer.tokenize(text)

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> Any:
        return self.tokenizer.convert_tokens_to_ids(tokens)

    def convert_ids_to_tokens(self, ids: Any, skip_special_tokens: bool = False) -> Any:
        ids = ids.tolist() if isinstance(ids, np.ndarray) else ids
        tokens = self.tokenizer.convert_ids_to_tokens(ids)
        if skip_special_tokens and not isinstance(tokens, str):
            special = set(self.tokenizer.added_tokens.special_ids)
            tokens = [t for t, i in zip(tokens, ids) if int(i) not in special]
        return tokens

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        return self.tokenizer.convert_tokens_to_string(tokens)

    def __call__(
        self,
        text: str | Sequence[str],
        text_pair: str | Sequence[str] | None = None,
        *,
        add_special_tokens: bool = True,
        padding: bool | str = False,
        truncation: bool | str | None = None,
        max_length: int | None = None,
        stride: int = 0,
        return_tensors: str | None = None,
        return_token_type_ids: bool | None = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
    ) -> BatchEncoding:
        """transformers' tokenizer call: lists for one text, lists of lists for a list, or (batch, seq) int64
        arrays with return_tensors="np" (padding=True pads a batch to its longest)."""
        check_tensor_type(return_tensors)
        fields = self.tokenizer(
            text,
            text_pair,
            add_special_tokens=add_special_tokens,
            padding=padding,
            truncation=truncation,
            max_length=max_length,
            stride=stride,
            return_tensors=return_tensors,
            return_overflowing_tokens=return_overflowing_tokens,
            return_offsets_mapping=return_offsets_mapping,
            return_special_tokens_mask=return_special_tokens_mask,
        )
        if return_token_type_ids is False:
            del fields["token_type_ids"]
        if return_attention_mask is False:
            del fields["attention_mask"]
        return BatchEncoding(fields)

    def encode(self, text: str, text_pair: str | None = None, **options: Any) -> Any:
        """The ids of one text (or pair): a list, or a (1, seq) array with return_tensors="np"."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes one text (str), not {type(text).__name__}; for many, call tokenizer(texts)")
        return self(text, text_pair, **options)["input_ids"]

    def encode_plus(self, text: str, text_pair: str | None = None, **options: Any) -> BatchEncoding:
        """transformers 4's name for the call on one text (or pair)."""
        if not isinstance(text, str):
            raise TypeError(f"encode_plus takes one text (str), not {type(text).__name__}; use batch_encode_plus")
        return self(text, text_pair, **options)

    def batch_encode_plus(self, batch_text_or_text_pairs: Sequence[Any], **options: Any) -> BatchEncoding:
        """transformers 4's name for the call on a list of texts, or of (text, pair) tuples."""
        items = list(batch_text_or_text_pairs)
        if items and all(isinstance(item, (tuple, list)) and len(item) == 2 for item in items):
            return self([a for a, _ in items], [b for _, b in items], **options)
        return self(items, **options)

    # --- ids back to text -----------------------------------------------------------------------------------

    def decode(self, token_ids: Any, skip_special_tokens: bool = False, **options: Any) -> str:
        """The text of one list (or 1-D array) of ids; special tokens kept unless skip_special_tokens, as there."""
        refuse_options(options, "decode", ("clean_up_tokenization_spaces",))
        ids = int_array(token_ids, "token_ids").reshape(-1).tolist()
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def batch_decode(self, sequences: Any, skip_special_tokens: bool = False, **options: Any) -> list[str]:
        return [self.decode(ids, skip_special_tokens, **options) for ids in sequences]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name_or_path={self.name_or_path!r}, vocab_size={self.vocab_size})"


class BertTokenizerFast(BertTokenizer):
    """transformers' BertTokenizerFast: the same tokenizer (numbert's equals the Rust one token for token)."""


def check_tensor_type(return_tensors: str | None) -> None:
    """NumPy ("np") or lists (None); "pt" and the other frameworks' answer in one line."""
    if return_tensors not in TENSOR_TYPES:
        raise ValueError(
            f'return_tensors={return_tensors!r}: numbert gives NumPy arrays; pass return_tensors="np" '
            f"(or torch.from_numpy(...) on them if you need torch tensors)"
        )


def refuse_options(options: dict, where: str, ignored: Sequence[str] = LOAD_OPTIONS_IGNORED) -> None:
    """Options that change nothing in numbert pass (`ignored`); any other is refused, named, in one line."""
    unknown = [name for name in options if name not in ignored]
    if unknown:
        raise TypeError(f"{where}() got an option numbert does not take: {unknown[0]!r}")


# --- the models ------------------------------------------------------------------------------------------


class InputEmbeddings:
    """`model.get_input_embeddings()`: the word-embedding table as transformers' nn.Embedding is read, called on
    ids (any shape -> shape + (hidden,)) or read whole as `.weight` (vocab, hidden)."""

    def __init__(self, weight: np.ndarray):
        self.weight = weight
        self.num_embeddings, self.embedding_dim = weight.shape

    def __call__(self, input_ids: Any) -> np.ndarray:
        ids = int_array(input_ids, "input_ids")
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_embeddings):
            raise ValueError(f"input_ids must lie in [0, {self.num_embeddings}); found {ids.min()}..{ids.max()}")
        return self.weight[ids]

    def __repr__(self) -> str:
        return f"Embedding({self.num_embeddings}, {self.embedding_dim})"


def int_array(values: Any, name: str) -> np.ndarray:
    """Ids, a mask or segment ids (a NumPy array, a list, a CPU torch tensor) as an int64 array, else one line."""
    try:
        array = np.asarray(values)
    except (TypeError, RuntimeError, ValueError, OverflowError):
        raise TypeError(f"{name} must be an array of integers (an array, or a list of rows of one length)") from None
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must be an array of integers, got dtype {array.dtype}")
    return array.astype(np.int64, copy=False)


class BertModel:
    """transformers' BertModel over a numbert `Bert`: `model(input_ids, attention_mask, token_type_ids)` (that
    order, as in transformers) gives a BaseModelOutputWithPoolingAndCrossAttentions of NumPy arrays."""

    device = "cpu"
    dtype = np.float32
    training = False

    def __init__(self, bert: Bert, *, output_hidden_states: Any = False, output_attentions: bool = False):
        self.bert = bert  # the pipeline that computes every number
        self.output_hidden_states = output_hidden_states  # the model's settings (transformers: its config's)
        self.output_attentions = output_attentions
        self.return_dict = True

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike,
        *,
        output_hidden_states: Any = False,
        output_attentions: bool = False,
        return_dict: bool = True,
        revision: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        torch_dtype: Any = None,
        dtype: Any = None,
        device_map: Any = None,
        **options: Any,
    ) -> BertModel:
        """A model directory or hub id, loaded as numbert.load loads it; output_hidden_states, output_attentions
        and return_dict become the model's settings (as transformers' config). attn_implementation and the like
        are accepted and change nothing: numbert's attention is the exact ("eager") one."""
        refuse_options(options, f"{cls.__name__}.from_pretrained")
        for name, value in (("torch_dtype", torch_dtype), ("dtype", dtype)):
            if value is not None and str(value).removeprefix("torch.") not in FLOAT32:
                raise torch_only(f"{name}={value}", "numbert computes in float32; leave the dtype out")
        if device_map not in (None, "auto"):
            check_device(device_map, "device_map")
        model = cls(
            load(name_or_path, revision=revision, cache_dir=cache_dir),
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        model.return_dict = return_dict
        return model

    # --- what torch models answer ---------------------------------------------------------------------------

    @property
    def config(self) -> Any:
        """numbert's BertConfig of the checkpoint (hidden_size, num_hidden_layers, num_attention_heads, ...)."""
        return self.bert.config

    @property
    def name_or_path(self) -> str:
        return self.bert.name or ""

    def eval(self) -> BertModel:
        """Itself: numbert always runs inference (no dropout)."""
        return self

    def train(self, mode: bool = True) -> BertModel:
        if mode:
            raise torch_only("model.train()", "fine-tune with transformers, save_pretrained, and load that directory")
        return self

    def to(self, device: Any) -> BertModel:
        """Itself, for the CPU (or float32); a GPU or another dtype needs torch."""
        name = str(device).removeprefix("torch.")
        if name.startswith(("float", "bfloat")) and name != "float32":
            raise torch_only(f"model.to({name})", "numbert computes in float32; drop the call")
        if name != "float32":
            check_device(device, "model.to")
        return self

    def cpu(self) -> BertModel:
        return self

    def float(self) -> BertModel:
        return self

    def cuda(self, *args: Any) -> BertModel:
        raise torch_only("model.cuda()", "drop the call, numbert's arrays are already on the CPU")

    def half(self) -> BertModel:
        raise torch_only("model.half()", "numbert computes in float32; drop the call")

    def parameters(self) -> Any:
        raise torch_only("model.parameters()", "numbert trains nothing; count the weights with model.num_parameters()")

    def num_parameters(self) -> int:
        return self.bert.parameter_count

    def get_input_embeddings(self) -> InputEmbeddings:
        """The word-embedding table (vocab, hidden): callable on ids, and `.weight`."""
        return InputEmbeddings(self.bert.encoder.word_embeddings)

    # --- the forward ----------------------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """transformers' call (`forward`); with `output_all_encoded_layers=`, pytorch-pretrained-bert's
        (`encoded_layers`), whose arguments come in its own order."""
        if "output_all_encoded_layers" in kwargs:
            return self.encoded_layers(*args, **kwargs)
        return self.forward(*args, **kwargs)

    def forward(
        self,
        input_ids: Any = None,
        attention_mask: Any = None,
        token_type_ids: Any = None,
        position_ids: Any = None,
        head_mask: Any = None,
        inputs_embeds: Any = None,
        *,
        output_attentions: Any = UNSET,
        output_hidden_states: Any = UNSET,
        return_dict: bool | None = None,
        **unsupported: Any,
    ) -> Any:
        """The encoder on (batch, seq) ids (a 1-D input is a batch of one); attention_mask and token_type_ids
        default to ones and zeros. output_hidden_states: True, False, or layer indices (the others then None);
        left out, the model's setting; None, none (transformers 5). return_dict=False: the plain tuple."""
        refuse_forward_options(input_ids, position_ids, head_mask, inputs_embeds, unsupported)
        hidden, attend = self.settings(output_hidden_states, output_attentions)
        out = self.run(input_ids, token_type_ids, attention_mask, attend)
        output = BaseModelOutputWithPoolingAndCrossAttentions(
            last_hidden_state=out.hidden_states[-1],
            pooler_output=out.pooler_output,
            hidden_states=selected_layers(out.hidden_states, hidden),
            attentions=tuple(out.attentions) if attend else None,
            cross_attentions=() if attend else None,
        )
        return self.answer(output, return_dict)

    def settings(self, output_hidden_states: Any, output_attentions: Any) -> tuple[Any, bool]:
        """The hidden states and attentions a call asks for: its arguments, the model's settings where left out."""
        hidden = self.output_hidden_states if output_hidden_states is UNSET else output_hidden_states
        attend = self.output_attentions if output_attentions is UNSET else output_attentions
        return hidden, bool(attend)

    def run(self, input_ids: Any, token_type_ids: Any, attention_mask: Any, output_attentions: bool) -> Any:
        """The pipeline's forward on the arrays, every position computed as in transformers; arrays with a batch
        axis."""
        ids = int_array(input_ids, "input_ids")
        batched = lambda a, name: None if a is None else np.atleast_2d(int_array(a, name))
        return self.bert.forward(
            np.atleast_2d(ids),
            batched(token_type_ids, "token_type_ids"),
            batched(attention_mask, "attention_mask"),
            output_attentions=output_attentions,
            every_position=True,
        )

    def answer(self, output: ModelOutput, return_dict: bool | None) -> Any:
        """The output, or its tuple when return_dict (else the model's setting) is False."""
        as_dict = self.return_dict if return_dict is None else return_dict
        return output if as_dict else output.to_tuple()

    def encoded_layers(
        self,
        input_ids: Any,
        token_type_ids: Any = None,
        attention_mask: Any = None,
        output_all_encoded_layers: bool = True,
    ) -> tuple[Any, np.ndarray | None]:
        """pytorch-pretrained-bert's call: (the list of the layers' outputs, no embedding output, each (batch, seq,
        hidden); or with output_all_encoded_layers=False the last layer alone, pooled_output)."""
        out = self.run(input_ids, token_type_ids, attention_mask, False)
        layers = list(out.hidden_states[1:]) if output_all_encoded_layers else out.hidden_states[-1]
        return layers, out.pooler_output

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.bert!r})"


class PytorchPretrainedBertModel(BertModel):
    """pytorch-pretrained-bert's BertModel: `encoded_layers, pooled = model(input_ids, token_type_ids,
    attention_mask)`, the 12 layers' outputs as a list (output_all_encoded_layers=True, its default)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.encoded_layers(*args, **kwargs)


class BertForMaskedLM(BertModel):
    """transformers' BertForMaskedLM: `.logits` (batch, seq, vocab) by the checkpoint's masked-LM head (refused at
    load, naming the missing tensors, without one)."""

    def __init__(self, bert: Bert, *, output_hidden_states: Any = False, output_attentions: bool = False):
        super().__init__(bert, output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        self.scores = MaskedLMLogits(bert.heads.masked_lm, bert.config)  # the pipeline's readout

    def forward(  # type: ignore[override]
        self,
        input_ids: Any = None,
        attention_mask: Any = None,
        token_type_ids: Any = None,
        *,
        labels: Any = None,
        output_attentions: Any = UNSET,
        output_hidden_states: Any = UNSET,
        return_dict: bool | None = None,
        **unsupported: Any,
    ) -> Any:
        """The masked LM's scores over the vocabulary at every position (padding included, as transformers)."""
        if labels is not None:
            raise torch_only("labels= (a training loss)", "score with .logits; train with transformers")
        refuse_forward_options(input_ids, None, None, None, unsupported)
        hidden, attend = self.settings(output_hidden_states, output_attentions)
        out = self.run(input_ids, token_type_ids, attention_mask, attend)
        every = dataclasses.replace(out, attention_mask=np.ones_like(out.attention_mask))  # padding scored too
        output = MaskedLMOutput(
            logits=np.stack(self.scores(every)),
            hidden_states=selected_layers(out.hidden_states, hidden),
            attentions=tuple(out.attentions) if attend else None,
        )
        return self.answer(output, return_dict)


def selected_layers(hidden_states: np.ndarray, selection: Any) -> tuple | None:
    """transformers' hidden_states for `output_hidden_states`: every layer's (True), none (False, None), or those
    of the indices given (an int or a list; the others None)."""
    if selection is None or isinstance(selection, bool):
        return tuple(hidden_states) if selection else None
    count = len(hidden_states)
    indices = [int(i) for i in np.atleast_1d(selection)]
    wanted = {i % count for i in indices if -count <= i < count}
    return tuple(h if i in wanted else None for i, h in enumerate(hidden_states))


def refuse_forward_options(input_ids: Any, position_ids: Any, head_mask: Any, inputs_embeds: Any, rest: dict) -> None:
    """A forward's arguments numbert does not take, refused in one line each."""
    if inputs_embeds is not None:
        raise TypeError("inputs_embeds: numbert's forward takes token ids; pass input_ids")
    if input_ids is None:
        raise TypeError("forward() needs input_ids")
    if head_mask is not None:
        raise TypeError("head_mask: numbert runs every attention head; leave it out")
    if position_ids is not None:
        ids = np.asarray(input_ids)
        if not np.array_equal(np.broadcast_to(np.asarray(position_ids), ids.shape), np.indices(ids.shape)[-1]):
            raise TypeError("position_ids: numbert numbers positions 0, 1, 2, ...; leave position_ids out")
    if rest:
        raise TypeError(f"forward() got an argument numbert does not take: {next(iter(rest))!r}")


# --- the Auto classes ------------------------------------------------------------------------------------


class AutoTokenizer:
    """transformers' AutoTokenizer: the directory's tokenizer (WordPiece, BPE or Unigram, as numbert reads it)."""

    def __init__(self) -> None:
        raise TypeError("AutoTokenizer is made by AutoTokenizer.from_pretrained(name_or_path)")

    from_pretrained = BertTokenizerFast.from_pretrained


class AutoModel:
    """transformers' AutoModel: any encoder numbert loads (BERT and its relatives), as a BertModel."""

    def __init__(self) -> None:
        raise TypeError("AutoModel is made by AutoModel.from_pretrained(name_or_path)")

    from_pretrained = BertModel.from_pretrained


class AutoModelForMaskedLM:
    """transformers' AutoModelForMaskedLM: a checkpoint with its masked-LM head, as a BertForMaskedLM."""

    def __init__(self) -> None:
        raise TypeError("AutoModelForMaskedLM is made by AutoModelForMaskedLM.from_pretrained(name_or_path)")

    from_pretrained = BertForMaskedLM.from_pretrained


__all__ = [
    "AutoModel",
    "AutoModelForMaskedLM",
    "AutoTokenizer",
    "BaseModelOutputWithPoolingAndCrossAttentions",
    "BatchEncoding",
    "BertForMaskedLM",
    "BertModel",
    "BertTokenizer",
    "BertTokenizerFast",
    "MaskedLMOutput",
    "ModelOutput",
    "PytorchPretrainedBertModel",
    "TorchOnly",
]
