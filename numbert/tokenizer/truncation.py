"""Truncation as transformers does it: how many tokens of each segment fit, and the overflowing windows.

All on token counts; the Tokenizer cuts its segments with the results.
"""

from __future__ import annotations

STRATEGIES = ("longest_first", "only_first", "only_second", "do_not_truncate")
SIDES = ("right", "left")  # where a text is cut: its end (the default), or its start (the end is kept)


def truncation_strategy(truncation: bool | str, max_length: int | None, stride: int) -> str:
    """The truncation strategy's name, "do_not_truncate" without max_length; checks the arguments."""
    if truncation is True:
        truncation = "longest_first"
    elif truncation is False:
        truncation = "do_not_truncate"
    if truncation not in STRATEGIES:
        raise ValueError(f"unknown truncation {truncation!r}; use True, False or one of {', '.join(STRATEGIES)}")
    if stride < 0:
        raise ValueError(f"stride must be >= 0, not {stride}")
    if max_length is None:
        return "do_not_truncate"
    if truncation != "do_not_truncate" and stride > max(0, max_length - 2):  # transformers' check: [CLS] A [SEP]
        raise ValueError(f"stride ({stride}) may not exceed max_length minus [CLS] and [SEP] ({max_length - 2})")
    return truncation


def check_side(side: str) -> str:
    """`side` if it is "right" or "left" (transformers' truncation_side), else a ValueError naming it."""
    if side not in SIDES:
        raise ValueError(f"truncation_side must be 'right' or 'left', got {side!r}")
    return side


def truncated_lengths(len_a: int, len_b: int | None, budget: int, strategy: str) -> tuple[int, int | None]:
    """How many tokens of A and B fit in `budget`, by transformers' truncation strategies.

    A budget of 0 (max_length just holds the special tokens) empties both, whatever the strategy,
    as Rust does; the tokens all go to the overflowing windows.

    >>> truncated_lengths(10, 4, 5, "longest_first")
    (3, 2)
    >>> truncated_lengths(10, 4, 0, "only_second")
    (0, 0)
    """
    if budget == 0:
        return 0, None if len_b is None else 0
    if len_a + (len_b or 0) <= budget:
        return len_a, len_b
    excess = len_a + (len_b or 0) - budget
    if strategy == "longest_first":
        if len_b is None:
            return budget, None
        short, long_ = sorted((len_a, len_b))  # the Rust arithmetic: keep the shorter whole if it fits
        long_ = short if short > budget else max(short, budget - short)
        if short + long_ > budget:
            short, long_ = budget // 2, budget // 2 + budget % 2
        return (short, long_) if len_a <= len_b else (long_, short)
    if strategy == "only_first":
        target = len_a
    elif len_b is None:
        raise ValueError("truncation='only_second' needs a second sequence")
    else:
        target = len_b
    if target <= excess:
        raise ValueError(
            f"truncation={strategy!r} cannot fit max_length: the sequence it may cut has "
            f"{target} tokens but {excess} must go"
        )
    return (len_a - excess, len_b) if strategy == "only_first" else (len_a, target - excess)


def windows(length: int, max_len: int, stride: int, side: str = "right") -> list[tuple[int, int]]:
    """The token windows truncation keeps: [0, max_len), then windows of `max_len` tokens, each
    overlapping the previous one by `stride`, until the end (as Rust's `Encoding.truncate`). Cut on the
    left, the mirror image: the last `max_len` tokens first, then windows towards the start.

    >>> windows(10, 4, 1)
    [(0, 4), (3, 7), (6, 10)]
    >>> windows(10, 4, 1, "left")
    [(6, 10), (3, 7), (0, 4)]
    """
    if length <= max_len:
        return [(0, length)]
    if max_len == 0:
        return [(0, 0), (0, length)]
    if stride >= max_len:
        raise ValueError(
            f"stride ({stride}) must be smaller than the window it overlaps ({max_len} tokens "
            f"once the special tokens are taken out of max_length)"
        )
    step = max_len - stride
    spans = [(start, min(start + max_len, length)) for start in range(0, length - max_len + step, step)]
    return spans if side == "right" else [(length - stop, length - start) for start, stop in spans]


def window_pairs(windows_a: list, windows_b: list) -> list[tuple]:
    """The (A window, B window) of each encoding, in Rust's order (Encoding.merge_with): the first
    windows of A and B, then each further window of A with every window of B, then the first window
    of A with each further window of B."""
    return (
        [(windows_a[0], windows_b[0])]
        + [(wa, wb) for wa in windows_a[1:] for wb in windows_b]
        + [(windows_a[0], wb) for wb in windows_b[1:]]
    )
