"""Qwen3-Reranker's relevance score at the model level: a random-weight Qwen3ForCausalLM saved by transformers (its
lm_head tied to the word table, and not), P(yes) over "no"/"yes" at the last position of left- and right-padded
batches of prompt ids, against the model card's formula computed with transformers (the whole vocabulary's logits,
log_softmax over the two, exp); the card's prompt text."""

from __future__ import annotations

import numpy as np
import pytest
from test_decoder_family import SHAPE, batch

import numbert
from numbert.checkpoint.weights import read_checkpoint
from numbert.model.yes_no import ASSISTANT, SYSTEM, YesNoHead, reranker_prompt, yes_probability

NO, YES = 7, 11  # the fixtures' "no" and "yes" ids


def card_scores(torch, model, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The model card's: logits[:, -1, :] of a left-padded batch, stack([no, yes]), log_softmax, exp of yes."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits[:, -1, :]
    pair = torch.stack([logits[:, NO], logits[:, YES]], dim=1)
    return torch.nn.functional.log_softmax(pair, dim=1)[:, 1].exp().numpy()


@pytest.mark.parametrize("tied", [True, False])
def test_yes_probability_equals_the_model_card_s(tmp_path, transformers, torch, tied):
    torch.manual_seed(0)
    config = transformers.Qwen3Config(**SHAPE, tie_word_embeddings=tied)
    model = transformers.Qwen3ForCausalLM(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
            else:
                parameter.mul_(10)  # scores away from 1/2, so a wrong row or position shows
    model.save_pretrained(tmp_path)
    ours = numbert.load(tmp_path)
    _, raw = read_checkpoint(tmp_path)
    unembedding = ours.encoder.word_embeddings if tied else raw["lm_head.weight"]
    assert ("lm_head.weight" in raw) != tied
    head = YesNoHead.of(unembedding, NO, YES)
    ids, mask = batch("left")
    want = card_scores(torch, model, ids, mask)
    assert np.ptp(want) > 0.1  # scores spread out: a wrong row or position would show
    right = np.zeros_like(ids)  # the same texts right-padded: numbert reads the last real position on either side
    for row, kept in enumerate(mask.astype(bool)):
        right[row, : kept.sum()] = ids[row, kept]
    for rows, kept in ((ids, mask), (right, mask[:, ::-1])):
        found = yes_probability(ours.forward(rows, attention_mask=kept).last_hidden_state, kept, head)
        assert found.dtype == np.float32
        np.testing.assert_allclose(found, want, atol=1e-5, rtol=0)


def test_the_card_s_prompt_and_bad_answer_ids():
    prompt = reranker_prompt("what is numpy?", "NumPy is an array library.")
    assert prompt.startswith(SYSTEM) and prompt.endswith(ASSISTANT)
    assert "<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n" in prompt
    assert "<Query>: what is numpy?\n<Document>: NumPy is an array library." in prompt
    assert "<Instruct>: Find code\n" in reranker_prompt("q", "d", "Find code")
    with pytest.raises(ValueError, match="'yes' token id 64 is not a row"):
        YesNoHead.of(np.zeros((64, 8), np.float32), 3, 64)
