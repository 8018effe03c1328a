"""BGE-M3's two heads beside its encoder, as FlagEmbedding saves them: `colbert_linear.pt` and `sparse_linear.pt`.

FlagEmbedding's M3 model (BAAI/bge-m3: XLM-RoBERTa large) reads three outputs off one forward: the dense vector
(the normalized [CLS] vector), a sparse weight per token (`sparse_linear`: hidden -> 1, then relu) and a
multi-vector output (`colbert_linear`: hidden -> hidden, on every token after [CLS]). Both heads are torch.nn.Linear
state dicts written by torch.save: `weight` (out, hidden) and `bias` (out,). They are read here without torch, by
numbert.checkpoint.torch_zip's gated unpickler: a file holding anything else (another object, a global a state dict
does not need, other tensors) is refused, saying what it holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..model.layers import Linear
from .sentence_config import check_head_tensor
from .torch_zip import read_torch_bin

M3_HEAD_FILES = ("colbert_linear.pt", "sparse_linear.pt")


class M3Heads(NamedTuple):
    """BGE-M3's heads: the multi-vector projection (dim, hidden) and the sparse weight (1, hidden)."""

    colbert: Linear
    sparse: Linear


def read_m3_heads(directory: str | Path, hidden_size: int) -> M3Heads | None:
    """The two heads of a BGE-M3 directory, checked against the encoder's `hidden_size`; None if it has neither
    file. One without the other, or a file that is not a Linear layer's state dict, is a ValueError naming it."""
    directory = Path(directory)
    paths = [directory / name for name in M3_HEAD_FILES]
    present = [p.is_file() for p in paths]
    if not any(present):
        return None
    if not all(present):
        missing = paths[present.index(False)]
        raise ValueError(f"{missing} is missing: a BGE-M3 directory has both {' and '.join(M3_HEAD_FILES)}")
    colbert = _linear(paths[0], hidden_size, None)
    sparse = _linear(paths[1], hidden_size, 1)
    return M3Heads(colbert, sparse)


def _linear(path: Path, hidden_size: int, width: int | None) -> Linear:
    """A torch.nn.Linear's state dict: exactly `weight` (width, hidden_size) and `bias` (width,), as float32."""
    tensors = read_torch_bin(path)  # the gated unpickler: refuses any global a state dict does not need
    if set(tensors) != {"weight", "bias"}:
        raise ValueError(
            f"{path}: expected a Linear layer's state dict (tensors 'weight' and 'bias'), found {sorted(tensors)}"
        )
    weight, bias = tensors["weight"], tensors["bias"]
    out = len(weight) if width is None and weight.ndim == 2 else width
    if weight.shape != (out, hidden_size) or bias.shape != (out,):
        raise ValueError(
            f"{path}: expected 'weight' of shape ({'out' if width is None else width}, {hidden_size}) and 'bias' of "
            f"its width, found {weight.shape} and {bias.shape}"
        )
    for name in ("weight", "bias"):
        check_head_tensor(path, name, tensors[name])
    return Linear(np.asarray(weight, np.float32), np.asarray(bias, np.float32))
