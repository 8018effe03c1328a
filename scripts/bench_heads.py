#!/usr/bin/env python
"""Fill-mask's vocabulary projection: numbert's masked-LM head against transformers' on the same threads.

    python scripts/bench_heads.py                  # 2 threads, rows 1, 8, 128, 512
    python scripts/bench_heads.py --threads 1 --rows 1,128 --rounds 30

The masked-LM head at bert-base size: dense 768 -> 768, GELU, LayerNorm, then the decoder tied to the
30522 x 768 word-embedding matrix (a 94 MB matrix product per call, whatever the number of rows), plus
the softmax over the vocabulary and the top 5, for `rows` hidden states. Both systems get the same
random weights (N(0, 0.02), seed 0) and the same inputs, and run in one process in interleaved rounds
(A B A B ...); the table gives medians and the ratio. transformers' fill-mask pipeline runs the head on
every token of the text, numbert's fill_mask on the [MASK]s only: the "fill-mask" line compares the
two on a 12-token sentence with one [MASK] (1 row against 12).

OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS are set here, before NumPy or torch load, and
torch.set_num_threads too; numbert itself never changes thread settings. The machine may be shared:
medians of many short rounds, and the spread (inter-quartile range) printed beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="BLAS / torch threads for both systems (default 2)")
    parser.add_argument("--rows", default="1,8,128,512", help="hidden states per call, comma-separated")
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds per row (default 20)")
    return parser.parse_args()


ARGS = parse_args()
for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = str(ARGS.threads)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench.harness import blas_info, cpu_name, markdown  # noqa: E402
from transformers import BertConfig  # noqa: E402
from transformers.models.bert.modeling_bert import BertOnlyMLMHead  # noqa: E402

from numbert.model.heads import MaskedLM, masked_lm_logits, softmax  # noqa: E402
from numbert.model.layers import Linear, Norm  # noqa: E402
from numbert.pipeline.tasks import top  # noqa: E402

HIDDEN, VOCAB, EPS = 768, 30522, 1e-12


def random_head(rng: np.random.Generator) -> MaskedLM:
    normal = lambda *shape: rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)  # noqa: E731
    return MaskedLM(
        transform=Linear(normal(HIDDEN, HIDDEN), normal(HIDDEN)),
        norm=Norm(1 + normal(HIDDEN), normal(HIDDEN)),
        decoder=normal(VOCAB, HIDDEN),
        bias=normal(VOCAB),
    )


def torch_head(head: MaskedLM) -> BertOnlyMLMHead:
    """transformers' BertOnlyMLMHead holding the same weights (in a whole model, decoder.bias is tied to bias)."""
    module = BertOnlyMLMHead(BertConfig(hidden_size=HIDDEN, vocab_size=VOCAB, layer_norm_eps=EPS)).eval()
    p = module.predictions
    with torch.no_grad():
        for param, array in (
            (p.transform.dense.weight, head.transform.weight),
            (p.transform.dense.bias, head.transform.bias),
            (p.transform.LayerNorm.weight, head.norm.weight),
            (p.transform.LayerNorm.bias, head.norm.bias),
            (p.decoder.weight, head.decoder),
            (p.decoder.bias, head.bias),
            (p.bias, head.bias),
        ):
            param.copy_(torch.from_numpy(array))
    return module


def numbert_logits(head: MaskedLM, h: np.ndarray) -> np.ndarray:
    return masked_lm_logits(h, head, EPS)


def numbert_fill(head: MaskedLM, h: np.ndarray) -> np.ndarray:
    return top(softmax(numbert_logits(head, h)), 5)


def torch_logits(module: BertOnlyMLMHead, h: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return module(h)


def torch_fill(module: BertOnlyMLMHead, h: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return module(h).softmax(-1).topk(5).indices


def timed(f) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def medians(calls: dict, rounds: int) -> dict[str, tuple[float, float]]:
    """(median, inter-quartile range) in ms of each call, run in interleaved rounds after one warm-up each."""
    for call in calls.values():
        call()  # warm up: page in the weights, start the threads
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times[name].append(timed(call) * 1e3)
    return {name: (statistics.median(t), float(np.subtract(*np.percentile(t, [75, 25])))) for name, t in times.items()}


def cells(m: dict[str, tuple[float, float]], ours: str, theirs: str) -> list[str]:
    return [
        f"{m[ours][0]:.1f} ± {m[ours][1]:.1f}",
        f"{m[theirs][0]:.1f} ± {m[theirs][1]:.1f}",
        f"{m[theirs][0] / m[ours][0]:.2f}",
    ]


def main() -> None:
    torch.set_num_threads(ARGS.threads)
    blas = blas_info()
    print(f"CPU: {cpu_name()}; {ARGS.threads} thread(s) each")
    print(f"numbert: NumPy {blas['numpy']}, {blas['library']} core {blas['core']}")
    onednn = "oneDNN" if torch.backends.mkldnn.is_available() else "no oneDNN"
    print(
        f"transformers: torch {torch.__version__}, {onednn}, "
        f"BLAS {torch.__config__.show().split('BLAS_INFO=')[-1].split(',')[0]}"
    )
    rng = np.random.default_rng(0)
    head = random_head(rng)
    module = torch_head(head)
    rows = []
    for n in map(int, ARGS.rows.split(",")):
        h = rng.standard_normal((n, HIDDEN), dtype=np.float32)
        ht = torch.from_numpy(h)
        gap = np.abs(numbert_logits(head, h) - torch_logits(module, ht).numpy()).max()
        assert gap < 1e-4, f"the two heads disagree: max |logit difference| {gap}"
        m = medians(
            {
                "numbert logits": lambda h=h: numbert_logits(head, h),
                "transformers logits": lambda ht=ht: torch_logits(module, ht),
                "numbert top 5": lambda h=h: numbert_fill(head, h),
                "transformers top 5": lambda ht=ht: torch_fill(module, ht),
            },
            ARGS.rounds,
        )
        rows.append(
            [
                f"{n} row{'s' * (n > 1)}",
                *cells(m, "numbert logits", "transformers logits"),
                *cells(m, "numbert top 5", "transformers top 5"),
                f"{gap:.1e}",
            ]
        )
    h = rng.standard_normal((12, HIDDEN), dtype=np.float32)
    masked, all_rows = h[6:7], torch.from_numpy(h)
    m = medians(
        {
            "numbert logits": lambda: numbert_logits(head, masked),
            "transformers logits": lambda: torch_logits(module, all_rows),
            "numbert top 5": lambda: numbert_fill(head, masked),
            "transformers top 5": lambda: torch_fill(module, all_rows),
        },
        ARGS.rounds,
    )
    rows.append(
        [
            "fill-mask: 12 tokens, 1 [MASK] (numbert 1 row, transformers 12)",
            *cells(m, "numbert logits", "transformers logits"),
            *cells(m, "numbert top 5", "transformers top 5"),
            "",
        ]
    )
    print()
    print(
        f"The masked-LM head at bert-base size (30522 x 768 decoder), milliseconds per call, median ± IQR of "
        f"{ARGS.rounds} interleaved rounds; 'top 5' adds the softmax over the vocabulary and the 5 best tokens:"
    )
    print(
        markdown(
            [
                "hidden states",
                "numbert logits",
                "transformers logits",
                "ratio",
                "numbert top 5",
                "transformers top 5",
                "ratio",
                "max |logit diff|",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
