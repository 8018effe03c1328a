"""Rotary position embeddings (RoFormer, Su et al. 2021): positions as rotations of each query and key.

BERT adds a learned position vector to each token's embedding. The modern family (ModernBERT, NomicBERT,
GTE, jina-embeddings-v3; docs/family.md) has no position table: each head's query and key at position p
are rotated, pair of coordinates by pair, by the angles p * inv_freq, so q . k depends on the two
positions only through their distance. The pairs are (i, i + d/2), the two halves of the head, as
transformers' `rotate_half` lays them out (all four models):

    cos, sin = rotation_table(rope, head_size, seq)   # (seq, head_size) each, the angles p * inv_freq twice
    rotate(x, cos, sin)                               # x * cos + rotate_half(x) * sin, in place

`Rope` is the base (theta) and the scaling transformers' `rope_parameters` name; its inverse frequencies
follow transformers' ROPE_INIT_FUNCTIONS, in float32 as it computes them. Reference: `reference.rotate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .scratch import scratch_array

f32 = np.float32

# rope_type -> the extra rope_parameters it reads (transformers' modeling_rope_utils); "default" reads none
ROPE_TYPES = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": (
        "factor",
        "original_max_position_embeddings",
        "attention_factor",
        "beta_fast",
        "beta_slow",
        "mscale",
        "mscale_all_dim",
        "truncate",
    ),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
    "proportional": ("factor",),
}
REFUSED = {  # rope types in circulation numbert does not run, and why
    "ntk": "GTE's remote code scales the base by it; transformers' GteModel has no such rope type and fails on it",
    "longrope": "its frequencies switch with the padded batch's length, so a vector would depend on its batch-mates",
}


# rope parameter -> (its least value, whether that value is allowed, what it is): each must be a finite number
PARAMETER_RANGES = {
    "factor": (0.0, False, "the scaling factor"),
    "original_max_position_embeddings": (1, True, "the pretraining's positions"),
    "attention_factor": (0.0, False, "the attention scaling"),
    "beta_fast": (0.0, False, "YaRN's rotations where interpolation ends"),
    "beta_slow": (0.0, False, "YaRN's rotations where it starts"),
    "mscale": (-math.inf, False, "YaRN's mscale"),
    "mscale_all_dim": (-math.inf, False, "YaRN's mscale_all_dim"),
    "low_freq_factor": (0.0, False, "llama3's low-frequency factor"),
    "high_freq_factor": (0.0, False, "llama3's high-frequency factor"),
}


def check_parameters(parameters: dict, source: str) -> None:
    """Each rope parameter a finite number in its range (PARAMETER_RANGES; original_max_position_embeddings an
    integer, truncate true or false), llama3's two frequency factors distinct: a 0, negative, NaN or infinite one
    would divide by zero or give NaN rotations."""
    for key, value in parameters.items():
        if key == "truncate":
            if not isinstance(value, bool):
                raise ValueError(f"{source}: rope parameter 'truncate' must be true or false, got {value!r:.80}")
            continue
        least, inclusive, what = PARAMETER_RANGES[key]
        integer = key == "original_max_position_embeddings"
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
            kind = "an integer" if integer else "a finite number"
            raise ValueError(f"{source}: rope parameter {key!r} ({what}) must be {kind}, got {value!r:.80}")
        if value < least or (value == least and not inclusive):
            bound = f"at least {least}" if inclusive else f"above {least:g}"
            raise ValueError(f"{source}: rope parameter {key!r} ({what}) must be {bound}, got {value!r}")
    if "low_freq_factor" in parameters and parameters["low_freq_factor"] == parameters.get("high_freq_factor"):
        raise ValueError(
            f"{source}: llama3's low_freq_factor and high_freq_factor are both {parameters['low_freq_factor']!r}; "
            f"they must differ (their difference divides)"
        )


@dataclass(frozen=True)
class Rope:
    """A rotary embedding's parameters, as transformers' rope_parameters names them (one dict per layer kind)."""

    theta: float = 10000.0  # rope_theta: the base of the wavelengths, 2 pi theta^(2i/d)
    type: str = "default"  # rope_type: one of ROPE_TYPES
    parameters: tuple[tuple[str, float | int | bool | None], ...] = ()  # the type's own (ROPE_TYPES), sorted

    @classmethod
    def from_dict(cls, d: dict, max_positions: int, source: str) -> Rope:
        """A rope_parameters dict (or an older rope_scaling one, its type under "type"), checked: a type numbert
        does not run, a partial rotation or a missing parameter is refused, naming it."""
        if not isinstance(d, dict):
            raise ValueError(f"{source}: rope_parameters must be an object, got {d!r:.80}")
        kind = d.get("rope_type", d.get("type", "default"))
        if not isinstance(kind, str):
            raise ValueError(f"{source}: rope_type must be a string, got {kind!r:.80}")
        if kind in REFUSED:
            raise ValueError(
                f"{source}: rope type {kind!r} is not one numbert runs ({REFUSED[kind]}); "
                f"it runs {', '.join(ROPE_TYPES)}"
            )
        if kind not in ROPE_TYPES:
            raise ValueError(f"{source}: unknown rope type {kind!r:.80}; numbert runs {', '.join(ROPE_TYPES)}")
        theta = d.get("rope_theta", 10000.0)
        if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not 1 < theta < math.inf:
            raise ValueError(f"{source}: rope_theta must be a number above 1, got {theta!r:.80}")
        partial = d.get("partial_rotary_factor", 1.0)
        if partial != 1.0:
            raise ValueError(
                f"{source}: partial_rotary_factor {partial!r:.80}: transformers' encoders rotate the whole head "
                f"(their cos and sin are head_size wide), so numbert runs 1.0 only"
            )
        parameters = {k: d[k] for k in ROPE_TYPES[kind] if d.get(k) is not None}
        if kind in ("yarn", "llama3"):
            parameters.setdefault("original_max_position_embeddings", max_positions)
        needed = {
            "linear": ["factor"],
            "dynamic": ["factor"],
            "llama3": ["factor", "low_freq_factor", "high_freq_factor"],
        }
        for key in needed.get(kind, []):
            if key not in parameters:
                raise ValueError(f"{source}: rope type {kind!r} needs {key!r} in rope_parameters")
        check_parameters(parameters, source)
        if kind == "yarn" and "factor" not in parameters:  # transformers' default: the positions over the pretraining's
            parameters["factor"] = max_positions / parameters["original_max_position_embeddings"]
        return cls(float(theta), kind, tuple(sorted(parameters.items())))

    def to_dict(self) -> dict:
        """As transformers' rope_parameters writes it."""
        return {"rope_theta": self.theta, "rope_type": self.type, **dict(self.parameters)}

    def frequencies(self, head_size: int, max_positions: int) -> tuple[np.ndarray, float]:
        """(inv_freq (head_size / 2,) float32, attention scaling): transformers' ROPE_INIT_FUNCTIONS of this type.

        "dynamic" rescales only inputs longer than max_positions, which numbert refuses, so it is "default" here."""
        p, d = dict(self.parameters), head_size
        exponents = np.arange(0, d, 2, dtype=f32) / f32(d)  # 2i / d, in float32 as torch computes them
        powers = (np.float64(self.theta) ** exponents.astype(np.float64)).astype(f32)  # theta^(2i/d)
        inv_freq = f32(1) / powers
        if self.type == "linear":
            return inv_freq / f32(p["factor"]), 1.0
        if self.type == "proportional":
            return inv_freq / f32(p.get("factor", 1.0)), 1.0
        if self.type == "llama3":
            return _llama3(inv_freq, p), 1.0
        if self.type == "yarn":
            return _yarn(powers, p, self.theta, d)
        return inv_freq, 1.0


def _llama3(inv_freq: np.ndarray, p: dict) -> np.ndarray:
    """Llama 3.1's: long wavelengths divided by factor, short ones kept, those between interpolated."""
    factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    context = p["original_max_position_embeddings"]
    wavelength = f32(2 * math.pi) / inv_freq
    scaled = np.where(wavelength > context / low, inv_freq / f32(factor), inv_freq).astype(f32)
    smooth = ((f32(context) / wavelength - f32(low)) / f32(high - low)).astype(f32)
    smoothed = (f32(1) - smooth) * scaled / f32(factor) + smooth * scaled
    medium = ~(wavelength < context / high) & ~(wavelength > context / low)
    return np.where(medium, smoothed, scaled).astype(f32)


def _yarn(powers: np.ndarray, p: dict, theta: float, d: int) -> tuple[np.ndarray, float]:
    """YaRN: frequencies blended between interpolated (divided by factor) and kept, by a ramp over the
    dimensions; cos and sin scaled by the attention factor (0.1 ln(factor) + 1 by default)."""
    factor, context = p["factor"], p["original_max_position_embeddings"]

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = p.get("attention_factor")
    if attention is None:
        m, m_all = p.get("mscale"), p.get("mscale_all_dim")
        attention = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)
    fast, slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1

    def dimension(rotations: float) -> float:  # the dimension that turns `rotations` times over the context
        return (d * math.log(context / (rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = dimension(fast), dimension(slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=f32) - f32(low)) / f32(high - low), 0, 1).astype(f32)
    kept = f32(1) - ramp  # the share of each frequency extrapolated (kept as it is)
    extrapolated, interpolated = f32(1) / powers, f32(1) / (f32(factor) * powers)
    return (interpolated * (f32(1) - kept) + extrapolated * kept).astype(f32), float(attention)


def rotation_table(rope: Rope, head_size: int, seq: int, max_positions: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of the angles p * inv_freq for positions p = 0 .. seq - 1, each frequency twice (once per
    half of the head), times the rope's attention scaling. -> (seq, head_size) float32 each"""
    inv_freq, scaling = rope.frequencies(head_size, max_positions)
    angles = np.arange(seq, dtype=f32)[:, None] * inv_freq  # float32 products, as torch's
    angles = np.concatenate([angles, angles], axis=1)
    cos, sin = np.cos(angles), np.sin(angles)
    if scaling != 1.0:
        cos *= f32(scaling)
        sin *= f32(scaling)
    return cos, sin


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x * cos + rotate_half(x) * sin over the last axis, in place; rotate_half(x) = (-x2, x1) for x's halves
    (x1, x2). x: (..., seq, heads, head_size) with cos, sin (seq, head_size), or any shapes that broadcast
    as those. Reference: `reference.rotate`, the same sums (x2 (-sin) added is x2 sin subtracted, bit for bit).
    Faster on whole heads (`rotate_on_tables`)."""
    half = x.shape[-1] // 2
    signed = np.empty_like(sin)  # (-sin, sin): rotate_half's signs (the two halves share their angles)
    np.negative(sin[..., :half], out=signed[..., :half])
    signed[..., half:] = sin[..., half:]
    return rotate_on_tables(x, cos[..., None, :], signed[..., None, :], scratch_array(*x.shape))


def rotate_on_tables(x: np.ndarray, cos: np.ndarray, signed_sin: np.ndarray, swapped: np.ndarray) -> np.ndarray:
    """x cos + swap(x) signed_sin in place, swap(x) = (x2, x1) written into `swapped` (x's shape): rotate_half(x) sin
    as swap(x) (-sin, sin), so that every product runs over whole heads, not half-heads (NumPy's loops over half a
    head at a time cost more than their work: docs/performance.md). The tables broadcast to x and may carry more
    factors than the angles' (a norm's gain: decoder.norm_and_rotate)."""
    half = x.shape[-1] // 2
    swapped[..., :half], swapped[..., half:] = x[..., half:], x[..., :half]
    swapped *= signed_sin
    x *= cos
    x += swapped  # (x1 cos - x2 sin, x2 cos + x1 sin)
    return x
