"""Qwen3-Reranker's relevance score: the probability of "yes" over "no" as the next token after its chat prompt.

Qwen3-Reranker is Qwen3 for causal LM (numbert.model.decoder runs its stack). Its model card formats each query and
document into a chat prompt (`reranker_prompt`) asking whether the document meets the query's requirements, the
answer "yes" or "no", and scores the pair by the language model's next-token logits at the prompt's last position:

    score = softmax([logit("no"), logit("yes")])[1] = sigmoid(logit("yes") - logit("no"))

Only those two logits are read, so only two rows of the unembedding matrix (lm_head, or the word table where the
checkpoint ties them) are computed against the last hidden state, not the whole vocabulary (151,669 rows).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .pooling import pool

# the model card's prompt (Qwen/Qwen3-Reranker-0.6B, "Transformers Usage"), around its format_instruction
SYSTEM = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    'provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
ASSISTANT = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
DEFAULT_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"
ANSWERS = ("no", "yes")  # the two tokens whose logits are read, in the order the card stacks them


def reranker_instruction(query: str, document: str, instruction: str | None = None) -> str:
    """The card's format_instruction: the task, the query and the document, each on a line of its own."""
    task = DEFAULT_INSTRUCTION if instruction is None else instruction
    return f"<Instruct>: {task}\n<Query>: {query}\n<Document>: {document}"


def reranker_prompt(query: str, document: str, instruction: str | None = None) -> str:
    """The whole prompt the last position of which is scored: SYSTEM, the instruction, ASSISTANT. (The card
    tokenizes the three parts each on its own and joins the ids.)"""
    return SYSTEM + reranker_instruction(query, document, instruction) + ASSISTANT


class YesNoHead(NamedTuple):
    """The two rows of the unembedding matrix a relevance score reads: (2, hidden), "no" then "yes"."""

    rows: np.ndarray

    @classmethod
    def of(cls, unembedding: np.ndarray, no_id: int, yes_id: int) -> YesNoHead:
        """The rows of `no_id` and `yes_id` (vocab, hidden): lm_head.weight, or the tied word table; only those two
        rows are read (and widened to float32), whatever the matrix's size or dtype."""
        vocabulary = len(unembedding)
        for name, token in (("no", no_id), ("yes", yes_id)):
            if not 0 <= token < vocabulary:
                raise ValueError(
                    f"the {name!r} token id {token} is not a row of the unembedding (0 to {vocabulary - 1})"
                )
        return cls(np.asarray(unembedding[[no_id, yes_id]], np.float32))


def yes_probability(last_hidden_state: np.ndarray, attention_mask: np.ndarray, head: YesNoHead) -> np.ndarray:
    """P(yes) per row: the last real position's state (either padding side) times the two rows, softmax of the two
    logits, as the card's log_softmax(...)[:, 1].exp(). (batch, seq, hidden), (batch, seq) -> (batch,) float32"""
    last = pool(last_hidden_state, attention_mask, "sep")  # (batch, hidden)
    logits = last @ head.rows.T  # (batch, 2): no, yes
    logits -= logits.max(axis=-1, keepdims=True)
    e = np.exp(logits)
    return (e[:, 1] / e.sum(axis=-1)).astype(np.float32)


def score_weight(yes_row: np.ndarray, no_row: np.ndarray | None) -> np.ndarray:
    """The one-row classifier a causal-LM reranker is: w_yes - w_no, whose product with the last hidden state is
    logit("yes") - logit("no") (the score sentence-transformers' LogitScore reads; sigmoid of it is P(yes)), or
    w_yes alone when no "no" token is read (LogitScore's false_token_id null). The seq-cls conversion of
    Qwen3-Reranker (Qwen3ForSequenceClassification) stores this row as its score.weight. (hidden,) -> (1, hidden)"""
    row = np.asarray(yes_row, np.float32) if no_row is None else np.asarray(yes_row, np.float32) - no_row
    return row.astype(np.float32)[None]
