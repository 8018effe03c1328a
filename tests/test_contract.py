"""The contract (docs/contract.md), fuzzed over every entry point: numbert's functions and a loaded model's methods,
every command, every HTTP route, every model kind's directory and the index files, given what users and attackers
send (tests/contract_inputs.py), answer validly or refuse in one line; never a traceback, never a 500.

The entry points are enumerated from the code at run time (numbert.__all__, Bert's methods, the command parser's
subcommands, the app's route table, config.FAMILY): one added without a generator here fails
test_every_entry_point_has_a_generator. Adding one is one line in the table of its kind (METHODS, TOKENIZER_METHODS,
FUNCTIONS and ENTRY_MODULES, COMMAND_INPUTS, MODEL_KINDS; a route is generated from its request schema in the
OpenAPI document).

Budget: contract_inputs.EXAMPLES fixed (derandomized) cases per property; scripts/fuzz_contract.py runs long.
Every known failure of round five is fixed: nothing is left out of the generators.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import shutil
import sys
import time
import urllib.parse
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from contract_inputs import (
    HOSTILE_NUMBERS,
    batches,
    budget,
    finite,
    hostile_numbers,
    not_texts,
    object_of,
    refused,
    small_ints,
    strict_json,
    texts,
    time_bound,
)
from hypothesis import event, given
from hypothesis import strategies as st
from test_decoder_reranker import write_qwen3_reranker

import numbert
from numbert.model.config import FAMILY, BertConfig
from numbert.testing import write_random_bert, write_random_splade

FIXTURES = Path(__file__).parent / "fixtures"
TINY = BertConfig(
    vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
    max_position_embeddings=64,
)  # fmt: skip


# --- the models every entry point is tried on ------------------------------------------------------------------


def write_sentence_transformers(directory: Path, vocab: Path) -> Path:
    """A tiny sentence-transformers directory: Transformer, Pooling (mean), Dense (32 -> 16, Tanh), Normalize."""
    from safetensors.numpy import save_file

    write_random_bert(directory, vocab, TINY)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    files = {
        "modules.json": modules,
        "1_Pooling/config.json": {"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True},
        "2_Dense/config.json": {
            "in_features": 32, "out_features": 16, "bias": True,
            "activation_function": "torch.nn.modules.activation.Tanh",
        },
        "sentence_bert_config.json": {"max_seq_length": 48, "do_lower_case": False},
        "config_sentence_transformers.json": {"prompts": {"query": "query: "}, "default_prompt_name": None},
    }  # fmt: skip
    for name, value in files.items():
        (directory / name).parent.mkdir(exist_ok=True)
        (directory / name).write_text(json.dumps(value), encoding="utf-8")
    (directory / "3_Normalize").mkdir(exist_ok=True)
    rng = np.random.default_rng(3)
    dense = {"linear.weight": rng.standard_normal((16, 32), dtype=np.float32), "linear.bias": np.zeros(16, np.float32)}
    save_file(dense, str(directory / "2_Dense" / "model.safetensors"))
    return directory


def write_jina_adapters(directory: Path) -> Path:
    """jina-embeddings-v3 as the hub holds it (XLMRobertaLoRA: LoRA adapters per task, task instructions), made from
    the modern family's jina fixture with NumPy, and a WordPiece vocabulary of the table's 64 entries."""
    from safetensors.numpy import load_file, save_file

    source = FIXTURES / "modern" / "jina_embeddings_v3-ForMaskedLM"
    tasks, rank = ["retrieval.query", "retrieval.passage"], 2
    rng = np.random.default_rng(5)
    hub = {}
    for name, tensor in load_file(str(source / "model.safetensors")).items():
        if not name.startswith("roberta."):
            continue
        base = name.removesuffix(".weight")
        if not name.endswith(".weight") or tensor.ndim != 2:
            hub[name] = tensor
            continue
        rows, columns = tensor.shape
        table = ".embeddings." in name
        shape_a, shape_b = ((rows, rank), (rank, columns)) if table else ((rank, columns), (rows, rank))
        hub[f"{base}.parametrizations.weight.original"] = tensor
        hub[f"{base}.parametrizations.weight.0.lora_A"] = rng.standard_normal((2, *shape_a), dtype=np.float32) * 0.3
        hub[f"{base}.parametrizations.weight.0.lora_B"] = rng.standard_normal((2, *shape_b), dtype=np.float32) * 0.3
    directory.mkdir(parents=True, exist_ok=True)
    save_file(hub, str(directory / "model.safetensors"))
    config = json.loads((source / "config.json").read_text())
    config = {k: v for k, v in config.items() if k not in ("rope_parameters", "architectures")}
    config |= {
        "model_type": "xlm-roberta", "architectures": ["XLMRobertaLoRA"], "position_embedding_type": "rotary",
        "rotary_emb_base": 20000.0, "max_position_embeddings": 512, "lora_adaptations": tasks, "lora_rank": rank,
        "lora_alpha": 1.0,
        "task_instructions": {t: f"Do {t}: " for t in tasks}, "matryoshka_dimensions": [8, 16, 32],
    }  # fmt: skip
    (directory / "config.json").write_text(json.dumps(config))
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz.,?!'", "the", "cat", "sat"]
    words += [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"][: 64 - len(words)]
    (directory / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")  # 64 entries: the table's
    return directory


def write_torch_pickle(directory: Path) -> Path:
    """The cross-encoder fixture with its weights as torch.save writes them (pytorch_model.bin: a zip of a pickle
    and its storages), the file numbert's own unpickler reads."""
    import torch
    from safetensors.numpy import load_file

    shutil.copytree(FIXTURES / "cross_encoder", directory, ignore=shutil.ignore_patterns("model.safetensors"))
    tensors = load_file(str(FIXTURES / "cross_encoder" / "model.safetensors"))
    torch.save({name: torch.from_numpy(t.copy()) for name, t in tensors.items()}, directory / "pytorch_model.bin")
    return directory


def write_gte_remote(directory: Path) -> Path:
    """GTE as Alibaba's remote code saves it (model_type "new", NewModel, rope_theta), from the modern fixture."""
    from safetensors.numpy import load_file, save_file

    source = FIXTURES / "modern" / "gte-ForMaskedLM"
    tensors = load_file(str(source / "model.safetensors"))
    directory.mkdir(parents=True, exist_ok=True)
    save_file({"new." + k.removeprefix("gte."): v for k, v in tensors.items() if k.startswith("gte.")},
              str(directory / "model.safetensors"))  # fmt: skip
    config = json.loads((source / "config.json").read_text())
    theta = config.pop("rope_parameters")["rope_theta"]
    config |= {"model_type": "new", "architectures": ["NewModel"], "rope_theta": theta}
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def write_modernbert_with(directory: Path, tokenizer: str, **config_changes) -> Path:
    """The modern family's ModernBERT fixture with tests/fixtures/TOKENIZER.json for its tokenizer, its vocabulary
    table widened to the tokenizer's ids with NumPy: mmBERT's shape with Gemma's tokenizer, and Qwen's tokenizer on
    an encoder (its tokenizer's entry points)."""
    from safetensors.numpy import load_file, save_file

    source = FIXTURES / "modern" / "modernbert-ForMaskedLM"
    spec = json.loads((FIXTURES / f"{tokenizer}.json").read_text(encoding="utf-8"))
    ids = [*spec["model"]["vocab"].values(), *(t["id"] for t in spec["added_tokens"])]
    size, rng = max(ids) + 1, np.random.default_rng(7)
    tensors = load_file(str(source / "model.safetensors"))
    for name in ("decoder.bias", "model.embeddings.tok_embeddings.weight"):
        old = tensors[name]
        tensors[name] = np.concatenate([old, rng.standard_normal((size - len(old), *old.shape[1:]), dtype=np.float32)])
    directory.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(directory / "model.safetensors"))
    config = json.loads((source / "config.json").read_text()) | {"vocab_size": size, **config_changes}
    (directory / "config.json").write_text(json.dumps(config))
    shutil.copy(FIXTURES / f"{tokenizer}.json", directory / "tokenizer.json")
    return directory


MMBERT_ROPE = {
    kind: {"rope_type": "default", "rope_theta": 160000.0} for kind in ("full_attention", "sliding_attention")
}
MMBERT_IDS = dict(pad_token_id=0, eos_token_id=1, bos_token_id=2, cls_token_id=2, sep_token_id=1)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory, vocab_path) -> dict[str, Path]:
    """A directory of each kind a user loads (MODEL_KINDS), small and random."""
    made = tmp_path_factory.mktemp("contract-models")
    return {
        "bert": write_random_bert(made / "bert", vocab_path, TINY),
        "sentence-transformers": write_sentence_transformers(made / "st", vocab_path),
        "cross-encoder": FIXTURES / "cross_encoder",
        "splade": write_random_splade(made / "splade", vocab_path, TINY),
        "colbert": FIXTURES / "colbert_pylate",
        "bge-m3": FIXTURES / "bge_m3",
        "jina-adapters": write_jina_adapters(made / "jina"),
        "tf": FIXTURES / "tf_bert",
        "gte-remote": write_gte_remote(made / "gte-remote"),
        "torch-pickle": write_torch_pickle(made / "torch-pickle"),
        "mmbert": write_modernbert_with(made / "mmbert", "gemma_bpe", rope_parameters=MMBERT_ROPE, **MMBERT_IDS),
        "qwen-tokenizer": write_modernbert_with(made / "qwen", "qwen_bpe", pad_token_id=900),
        "qwen3-reranker": write_qwen3_reranker(made / "qwen3-reranker"),
        **{f"family:{p.name}": p for p in sorted((FIXTURES / "family").iterdir()) if p.is_dir()},
        **{f"modern:{p.name}": p for p in sorted((FIXTURES / "modern").iterdir()) if p.is_dir()},
        **{f"decoder:{p.name}": p for p in sorted((FIXTURES / "decoder").iterdir()) if p.is_dir()},
    }


TEXT_MODELS = (
    "bert",
    "sentence-transformers",
    "cross-encoder",
    "splade",
    "colbert",
    "bge-m3",
    "jina-adapters",
    "mmbert",
    "qwen-tokenizer",
    "qwen3-reranker",
)


@pytest.fixture(scope="module")
def models(model_dirs) -> dict[str, numbert.Bert]:
    return {kind: numbert.load(model_dirs[kind]) for kind in TEXT_MODELS}


# --- the public API: numbert's functions and a loaded model's methods ------------------------------------------

pairs = st.one_of(
    st.tuples(texts(), texts()),
    st.lists(st.tuples(texts(long=False), texts(long=False)), max_size=3),
    st.lists(st.one_of(st.tuples(texts(long=False)), st.lists(texts(long=False), max_size=3), not_texts), max_size=3),
    not_texts,
)
ids = st.one_of(
    st.lists(st.integers(-3, 40), max_size=6),
    st.lists(st.lists(st.integers(0, 40), max_size=5), max_size=3),
    st.lists(st.sampled_from(HOSTILE_NUMBERS), min_size=1, max_size=3),
    st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=3),
    not_texts,
)
recipe_choices = st.dictionaries(
    st.sampled_from(["pooling", "layers", "normalize", "max_length", "prompt", "dimensions", "long", "stride",
                     "truncation_side", "precision", "combine", "prompt_name", "task"]),
    st.one_of(hostile_numbers, texts(long=False), st.sampled_from(["mean", "cls", "max", "window", "left", "int8"])),
    max_size=2,
)  # fmt: skip
options = {  # a keyword argument at its edges
    "batch_size": small_ints,
    "top_k": small_ints,
    "truncate_dim": st.one_of(small_ints, hostile_numbers),
    "k": small_ints,
    "max_length": small_ints,
    "stride": small_ints,
    "max_masks": small_ints,
    "max_answer_len": small_ints,
    "max_seq_len": small_ints,
    "doc_stride": small_ints,
    "is_query": st.one_of(st.booleans(), hostile_numbers),
    "long": st.sampled_from(["truncate", "window", "error", "nope", None]),
    "truncation_side": st.sampled_from(["left", "right", "middle", None, 3]),
    "activation_fn": st.sampled_from([None, "sigmoid", "softmax", "torch.nn.Identity", "os.system", 3]),
    "function": st.sampled_from([None, "sigmoid", "softmax", "none", "nope"]),
    "aggregation": st.sampled_from(["simple", "first", "average", "max", "none", "nope"]),
    "layers": st.one_of(st.sampled_from(["sum_last_four", "last", "-1,-2", "9", "", "x"]), hostile_numbers),
    "weights_for_different_modes": st.one_of(st.none(), st.lists(hostile_numbers, max_size=4)),
    "max_active_dims": st.one_of(small_ints, hostile_numbers),
    "threshold": st.one_of(st.floats(), hostile_numbers),
    "min_community_size": st.one_of(small_ints, hostile_numbers),
    "prompt": st.one_of(texts(long=False), not_texts),
    "prompt_name": st.sampled_from([None, "query", "", 3]),
}


def call(*positional: st.SearchStrategy, **keywords: str) -> st.SearchStrategy[tuple[tuple, dict]]:
    """The arguments of one call: the positional ones drawn, and (one call in three) one of the named keyword
    options (several hostile options would hide each other: the first refused)."""
    names = keywords.get("with_", "").split()
    one = [st.fixed_dictionaries({name: options[name]}) for name in names]
    return st.tuples(st.tuples(*positional), st.one_of(st.just({}), st.just({}), *one) if one else st.just({}))


vectors = st.one_of(
    st.builds(lambda n, d: np.random.default_rng(n).standard_normal((n, d), dtype=np.float32), st.integers(0, 3),
              st.integers(0, 4)),
    st.sampled_from([np.full((2, 4), np.nan, np.float32), np.zeros((2, 4), np.float32), np.zeros((0, 4)),
                     np.zeros(4, np.int8), np.zeros((2, 3, 4), np.float32), np.array(["a"]), np.float32(1.0)]),
    not_texts,
)  # fmt: skip

# a loaded model's methods a user calls -> the calls to try (each model kind, each call: an answer or a refusal)
METHODS = {
    "__call__": call(batches(), with_="max_length long stride"),
    "embed": call(batches(), with_="batch_size max_length stride long truncation_side"),
    "encode": call(batches(), with_="batch_size"),
    "encode_query": call(batches(), with_="batch_size max_length"),
    "encode_document": call(batches(), with_="batch_size max_length"),
    "get_embedding_dimension": call(),
    "get_sentence_embedding_dimension": call(),
    "similarity": call(st.one_of(texts(), vectors), st.one_of(texts(), vectors)),
    "word_vectors": call(st.one_of(texts(), not_texts), with_="layers long stride"),
    "embed_sparse": call(batches(), with_="top_k batch_size max_length truncation_side"),
    "sparse_tokens": call(st.one_of(not_texts, st.just(None))),
    "embed_multi": call(batches(), with_="is_query batch_size truncation_side"),
    "rank_multi": call(st.one_of(texts(), not_texts), batches(long=False), with_="top_k"),
    "embed_m3": call(batches(), with_="batch_size max_length truncation_side"),
    "m3_scores": call(pairs, with_="weights_for_different_modes"),
    "fill_mask": call(st.one_of(texts(), st.just("a [MASK] b <mask>"), not_texts), with_="top_k max_masks"),
    "is_next": call(texts(), st.one_of(texts(), not_texts)),
    "classify": call(batches(), with_="top_k function batch_size"),
    "ner": call(batches(), with_="aggregation stride"),
    "qa": call(texts(), st.one_of(texts(), not_texts), with_="top_k max_answer_len max_seq_len doc_stride"),
    "predict": call(pairs, with_="batch_size activation_fn max_length long stride prompt prompt_name"),
    "rerank": call(
        st.one_of(texts(), not_texts), batches(long=False), with_="top_k max_length long stride prompt prompt_name"
    ),
    "token_embedding": call(st.one_of(texts(long=False), st.integers(-5, 2**40), st.lists(st.integers(-2, 9)))),
    "nearest_tokens": call(st.one_of(texts(long=False), st.integers(-5, 2**40), vectors), with_="k"),
    "forward": call(ids),
    "recipe": st.tuples(st.just(()), recipe_choices),
    "windowed": call(st.one_of(texts(), not_texts), with_="stride max_length batch_size"),
    "decode": call(ids, st.booleans()),
}
# Bert's methods for the engines (numbert.cli, numbert.serve, ...): they take what the pipeline itself made (rows,
# recipes, encodings, checked ids), documented in docs/contract.md as outside the contract's user inputs
ENGINE_METHODS = {
    "batches", "forward_rows", "id_rows", "multi_rows", "multi_vectors", "pair_rows", "require_tokenizer", "rows",
    "sentence_vectors", "sequence_logits", "sparse_vectors", "token_vectors", "tokenize", "warm_up", "from_pretrained",
}  # fmt: skip

NAMES = ["", ".", "/", "/etc", "/dev/null", "../..", "./no/such/model", "./" + "a" * 300, "./model\n"]  # paths: no hub
# the modules whose public functions are entry points (their __all__); a door module added is one line here and its
# functions' lines in FUNCTIONS
ENTRY_MODULES = ("numbert", "numbert.util")
# their functions -> the calls to try (numbert.encode's and .forward's model: a loaded one, given by the test)
FUNCTIONS = {
    "numbert.encode": call(batches(), with_="batch_size max_length"),
    "numbert.forward": call(batches(), with_="max_length long"),
    "numbert.load": call(st.one_of(st.sampled_from(NAMES), not_texts)),
    "numbert.SentenceTransformer": call(st.one_of(st.sampled_from(NAMES), not_texts), with_="truncate_dim"),
    "numbert.CrossEncoder": call(st.one_of(st.sampled_from(NAMES), not_texts)),
    "numbert.maxsim": call(st.one_of(vectors, st.lists(vectors, max_size=2)), st.one_of(vectors, st.lists(vectors))),
    "numbert.semantic_search": call(vectors, vectors, with_="top_k"),
    "numbert.threads": call(st.one_of(hostile_numbers, st.integers(-3, 3))),
    "numbert.SparseEncoder": call(st.one_of(st.sampled_from(NAMES), not_texts), with_="max_active_dims"),
    "numbert.MultiVectorEncoder": call(st.one_of(st.sampled_from(NAMES), not_texts)),
    # the sentence-transformers door's util: embeddings at their edges
    **{f"numbert.util.{n}": call(vectors) for n in ("normalize_embeddings", "paraphrase_mining_embeddings")},
    **{f"numbert.util.{n}": call(vectors, vectors) for n in ("cos_sim", "dot_score", "pairwise_dot_score",
       "pairwise_cos_sim", "euclidean_sim", "manhattan_sim", "pairwise_euclidean_sim", "pairwise_manhattan_sim")},
    "numbert.util.semantic_search": call(vectors, vectors, with_="top_k"),
    "numbert.util.paraphrase_mining": call(batches(), with_="top_k batch_size"),
    "numbert.util.community_detection": call(vectors, with_="threshold min_community_size batch_size"),
    "numbert.util.quantize_embeddings": call(vectors, st.sampled_from(["float32", "int8", "uint8", "binary",
                                                                       "ubinary", "nope", 3, None])),
    # the transformers door: the classes' loaders (their loaded objects' calls: DOOR_CALLS)
    **{f"numbert.transformers.{c}.from_pretrained": call(st.one_of(st.sampled_from(NAMES), not_texts))
       for c in ("AutoTokenizer", "BertTokenizer", "AutoModel", "BertModel", "BertForMaskedLM")},
}  # fmt: skip
WITH_MODEL = ("numbert.encode", "numbert.forward")  # a loaded model as the model= keyword
MODEL_FIRST = ("numbert.util.paraphrase_mining",)  # a loaded model as the first argument


def entry_point(name: str):
    """The function a FUNCTIONS name names: a module's function, or a class's method (numbert.transformers.X.f)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise LookupError(name)


def answer_or_refusal(run, what: str, known=lambda error: False, given=()) -> None:
    """Run `run()`: its answer holds finite numbers only (when the numbers `given` are finite), or it raised a
    refusal the contract allows."""
    try:
        with time_bound():
            answer = run()
    except Exception as error:
        assert not isinstance(error, TimeoutError), f"{what}: {error}"
        event(f"{what}: {type(error).__name__}")
        if known(error):
            return
        reason = refused(error)
        assert reason is None, f"{what}: {reason}"
        return
    event(f"{what}: answered")
    assert finite(answer) or not finite(given), f"{what}: an answer with non-finite numbers"


@budget(400)
@given(st.data())
def test_a_model_method_answers_or_refuses_in_one_line(models, data):
    kind = data.draw(st.sampled_from(TEXT_MODELS), "kind")
    method = data.draw(st.sampled_from(sorted(METHODS)), "method")
    args, kwargs = data.draw(METHODS[method], "arguments")
    model = models[kind]
    if method in ("embed", "encode", "embed_sparse", "classify", "ner", "embed_m3", "embed_multi"):
        kwargs.setdefault("batch_size", 8)
    if method in ("embed",):
        kwargs["progress"] = False
    answer_or_refusal(
        lambda: getattr(model, method)(*args, **kwargs),
        f"{kind}.{method}",
        given=(args, kwargs),
    )


@budget(100)
@given(st.data())
def test_a_function_of_numbert_answers_or_refuses_in_one_line(models, data):
    name = data.draw(st.sampled_from(sorted(FUNCTIONS)), "function")
    args, kwargs = data.draw(FUNCTIONS[name], "arguments")
    function = entry_point(name)
    if name in WITH_MODEL:
        kwargs["model"] = models["sentence-transformers"]
    if name in MODEL_FIRST:
        args = (models["sentence-transformers"], *args)
    if name == "numbert.threads":
        answer_or_refusal(lambda: function(*args).__enter__().__exit__(None, None, None), name)  # noqa: PLC2801
        return
    answer_or_refusal(lambda: function(*args, **kwargs), name, given=(args, kwargs))


options |= {
    "add_special_tokens": st.one_of(st.booleans(), hostile_numbers),
    "truncation": st.sampled_from([True, False, None, "longest_first", "only_first", "only_second", "nope", 3]),
    "padding": st.sampled_from([True, False, "longest", "max_length", "nope", 3]),
    "return_overflowing_tokens": st.booleans(),
    "skip_special_tokens": st.one_of(st.booleans(), hostile_numbers),
}
tokens = st.one_of(texts(long=False), st.lists(texts(long=False), max_size=3), not_texts)
# numbert.Tokenizer's methods -> the calls to try, on each text model's tokenizer
TOKENIZER_METHODS = {
    "encode": call(
        st.one_of(texts(), not_texts), with_="add_special_tokens max_length truncation stride truncation_side"
    ),
    "encode_batch": call(batches(), with_="max_length truncation padding stride return_overflowing_tokens"),
    "decode": call(ids, with_="skip_special_tokens"),
    "tokenize": call(st.one_of(texts(), not_texts)),
    "normalize": call(st.one_of(texts(), not_texts)),
    "convert_ids_to_tokens": call(st.one_of(ids, st.integers(-5, 2**40))),
    "convert_tokens_to_ids": call(tokens),
    "convert_tokens_to_string": call(tokens),
    "num_special_tokens": call(st.one_of(st.booleans(), not_texts)),
}
TOKENIZER_ENGINE_METHODS = {"check_embedding_rows", "pad", "from_pretrained", "from_tokenizer_json", "from_vocab"}


@budget(200)
@given(st.data())
def test_a_tokenizer_method_answers_or_refuses_in_one_line(models, data):
    kind = data.draw(st.sampled_from(TEXT_MODELS), "kind")
    method = data.draw(st.sampled_from(sorted(TOKENIZER_METHODS)), "method")
    args, kwargs = data.draw(TOKENIZER_METHODS[method], "arguments")
    tokenizer = models[kind].tokenizer
    answer_or_refusal(lambda: getattr(tokenizer, method)(*args, **kwargs), f"{kind} tokenizer.{method}")


ints = st.one_of(
    ids,
    st.builds(np.array, ids),
    st.sampled_from(
        [np.zeros((2, 3), np.int64), np.ones((1, 0), int), np.full((1, 3), 2**40), np.zeros((1, 2, 3), int)]
    ),
)
# the transformers door's loaded objects (tokenizer, model) -> their calls, as the tutorials make them
DOOR_CALLS = {
    "tokenizer.__call__": call(st.one_of(texts(), batches(), not_texts),
                               with_="padding truncation max_length add_special_tokens"),
    "tokenizer.tokenize": call(st.one_of(texts(), not_texts)),
    "tokenizer.convert_tokens_to_ids": call(tokens),
    "tokenizer.decode": call(ids, with_="skip_special_tokens"),
    "model.__call__": call(ints),
    "model.forward": call(ints, ints),
    "model.get_input_embeddings": call(),
    "embeddings.__call__": call(ints),
}  # fmt: skip


@pytest.fixture(scope="module")
def door(model_dirs) -> dict:
    from numbert import transformers as door

    model = door.BertModel.from_pretrained(str(model_dirs["bert"]), output_hidden_states=True)
    return {
        "tokenizer": door.AutoTokenizer.from_pretrained(str(model_dirs["bert"])),
        "model": model,
        "embeddings": model.get_input_embeddings(),
    }


@budget(150)
@given(st.data())
def test_a_transformers_door_call_answers_or_refuses_in_one_line(door, data):
    name = data.draw(st.sampled_from(sorted(DOOR_CALLS)), "call")
    args, kwargs = data.draw(DOOR_CALLS[name], "arguments")
    owner, _, method = name.partition(".")
    answer_or_refusal(lambda: getattr(door[owner], method)(*args, **kwargs), f"transformers door {name}",
                      given=(args, kwargs))  # fmt: skip


# --- model directories: every kind, each file made hostile ------------------------------------------------------

# the model kinds numbert reads: config.FAMILY's members (tests/fixtures/family, /modern) and the recipes and heads
MODEL_KINDS = {
    "bert": "embed",
    "sentence-transformers": "embed",
    "cross-encoder": "predict",
    "splade": "embed_sparse",
    "colbert": "embed_multi",
    "bge-m3": "embed_m3",
    "jina-adapters": "embed",
    "tf": "embed",
    "torch-pickle": "predict",
    "mmbert": "embed",
    "qwen-tokenizer": "embed",
    "qwen3-reranker": "predict",
}


def numeric_paths(value, path=()):
    """The paths to every number (and bool) in a JSON value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from numeric_paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from numeric_paths(v, (*path, i))
    elif isinstance(value, (int, float)):
        yield path


def set_path(value, path, new):
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


def change_config(directory: Path, data, kind: str) -> str:
    """One number of one JSON file of the directory set to a hostile value."""
    files = sorted(p for p in directory.rglob("*.json") if p.name not in ("tokenizer.json",) and p.stat().st_size)
    path = data.draw(st.sampled_from(files), "json file")
    value = json.loads(path.read_text(encoding="utf-8"))
    numbers = sorted(numeric_paths(value), key=str)
    if not numbers:
        return "no numbers"
    where = data.draw(st.sampled_from(numbers), "field")
    new = data.draw(hostile_numbers, "value")
    set_path(value, where, new)
    path.write_text(json.dumps(value), encoding="utf-8")  # NaN and Infinity as Python writes them
    return f"{path.name}:{'.'.join(map(str, where))}={new!r}"


def change_tensor(directory: Path, data, kind: str) -> str:
    """One tensor of a weights file (safetensors, torch's pickle) missing, non-finite, of another dtype or shape."""
    files = sorted([*directory.rglob("*.safetensors"), *directory.rglob("pytorch_model.bin")])
    if not files:
        return "no weights file"
    path = data.draw(st.sampled_from(files), "weights file")
    load_file, save_file = weights_io(path)
    tensors = load_file(str(path))
    name = data.draw(st.sampled_from(sorted(tensors)), "tensor")
    how = data.draw(st.sampled_from(["missing", "nan", "inf", "float16", "float64", "int8", "int64", "shape", "empty"]))
    t = tensors[name]
    if how == "missing":
        del tensors[name]
    elif how in ("nan", "inf"):
        t = t.astype(np.float32).copy()
        t.flat[0] = np.nan if how == "nan" else np.inf
        tensors[name] = t
    elif how == "shape":
        tensors[name] = np.concatenate([t, t[:1]]) if t.ndim else t.reshape(1)
    elif how == "empty":
        tensors[name] = np.zeros((0, *t.shape[1:]), t.dtype)
    else:
        tensors[name] = t.astype(how)
    save_file(tensors, str(path))
    return f"{path.name}:{name} {how}"


def weights_io(path: Path):
    """(load, save) of a weights file as {name: array}."""
    if path.suffix == ".safetensors":
        from safetensors.numpy import load_file, save_file

        return load_file, save_file
    import torch

    def load(name: str) -> dict[str, np.ndarray]:
        return {k: v.numpy() for k, v in torch.load(name, weights_only=True).items()}

    def save(tensors: dict[str, np.ndarray], name: str) -> None:
        torch.save({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()}, name)

    return load, save


def truncate_file(directory: Path, data, kind: str) -> str:
    """One file cut short (a safetensors, a pickle, a TF bundle, a tokenizer, a config)."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix != ".npz")
    path = data.draw(st.sampled_from(files), "file")
    size = path.stat().st_size
    keep = data.draw(st.sampled_from([0, 1, 8, size // 2, max(size - 1, 0)]), "bytes kept")
    with open(path, "r+b") as f:
        f.truncate(keep)
    return f"{path.name} cut to {keep} of {size} bytes"


def run_kind(model: numbert.Bert, kind: str):
    """The kind's own task on two texts (a model without a tokenizer: the forward of token ids)."""
    if model.tokenizer is None:
        return model.forward([[0, 5, 6, 2]])
    texts_ = ["The cat sat on the mat.", "a"]
    task = MODEL_KINDS.get(kind, "embed")
    if task == "predict":
        return model.predict([tuple(texts_)])
    if task == "embed_m3":
        return model.embed_m3(texts_)
    if task == "embed":
        return model.embed(texts_, progress=False)
    return getattr(model, task)(texts_)


def copy_model(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, dirs_exist_ok=False, ignore=shutil.ignore_patterns("expected.npz"))
    return target


@budget(300)
@given(st.data())
def test_a_hostile_model_directory_loads_and_answers_or_refuses_in_one_line(model_dirs, tmp_path_factory, data):
    kind = data.draw(st.sampled_from(sorted(model_dirs)), "kind")
    directory = copy_model(model_dirs[kind], tmp_path_factory.mktemp("hostile") / "model")
    change = data.draw(st.sampled_from([change_config, change_tensor, truncate_file]), "change")
    what = change(directory, data, kind)
    event(f"{kind}")
    if what == "excluded":
        event("excluded")
        return
    non_finite = " nan" in what or " inf" in what
    try:
        with time_bound():
            model = numbert.load(directory)
            answer = run_kind(model, kind)
    except Exception as error:
        assert not isinstance(error, TimeoutError), f"{kind}, {what}: {error}"
        event(f"{change.__name__}: {type(error).__name__}")
        reason = refused(error)
        assert reason is None, f"{kind}, {what}: {reason}"
        return
    event(f"{change.__name__}: answered")
    # a non-finite weight gives non-finite vectors, said once in one line (the load's check_finite=True names it)
    assert non_finite or "nan" in what.lower() or "inf" in what.lower() or finite(answer), f"{kind}, {what}: not finite"


def test_every_model_kind_is_generated(model_dirs, models):
    """Each member of config.FAMILY has a directory in the generator, and each recipe or head kind loads as it."""
    configs = [p / "config.json" for p in model_dirs.values() if (p / "config.json").is_file()]
    members = {json.loads(c.read_text()).get("model_type", "bert") for c in configs}
    assert set(FAMILY) <= members, f"model types without a generator: {sorted(set(FAMILY) - members)}"
    assert set(MODEL_KINDS) <= set(model_dirs)
    assert models["splade"].is_sparse_encoder and models["colbert"].is_multi_vector and models["bge-m3"].m3
    assert models["jina-adapters"].config.task_adapters and models["cross-encoder"].labels
    assert (model_dirs["tf"] / "bert_model.ckpt.index").is_file()


# --- every entry point has its generator --------------------------------------------------------------------------


def command_names() -> list[str]:
    from numbert.cli import build_parser

    return list(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def test_every_entry_point_has_a_generator(http):
    from numbert.pipeline.bert import Bert

    methods = {n for n in dir(Bert) if not n.startswith("_") and callable(getattr(Bert, n))} | {"__call__"}
    properties = {n for n in dir(Bert) if isinstance(getattr(Bert, n, None), property)}
    assert methods - properties <= set(METHODS) | ENGINE_METHODS, (
        f"methods without a generator: {sorted(methods - properties - set(METHODS) - ENGINE_METHODS)}"
    )
    from numbert import Tokenizer

    tokenizer_methods = {n for n in dir(Tokenizer) if not n.startswith("_") and callable(getattr(Tokenizer, n))}
    missing = tokenizer_methods - set(TOKENIZER_METHODS) - TOKENIZER_ENGINE_METHODS
    assert not missing, f"Tokenizer methods without a generator: {sorted(missing)}"
    functions = set()
    for name in ENTRY_MODULES:
        module = importlib.import_module(name)
        public = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
        functions |= {
            f"{name}.{n}" for n in public if callable(getattr(module, n)) and not isinstance(getattr(module, n), type)
        }
    assert functions <= set(FUNCTIONS), f"functions without a generator: {sorted(functions - set(FUNCTIONS))}"
    assert set(command_names()) <= set(COMMAND_INPUTS), (
        f"commands: {sorted(set(command_names()) - set(COMMAND_INPUTS))}"
    )
    client, described = http
    for route in client.app.routes:  # each route's bodies are made from its request schema: it must have one
        operations = described["paths"].get(openapi_path(route.path), {})
        for method in route.methods - {"HEAD"}:
            assert method.lower() in operations, f"{method} {route.path} is not in the OpenAPI document"
            body = operations[method.lower()].get("requestBody")
            assert method == "GET" or body["content"]["application/json"]["schema"], route.path


# --- the command line ---------------------------------------------------------------------------------------------


def write_inputs(directory: Path) -> dict[str, Path]:
    """The files a command is given, hostile and not: texts, indexes, a file of the user's never to be touched."""
    rng = np.random.default_rng(0)
    files = {
        "texts.txt": b"The cat sat on the mat.\nA dog.\n\nbank\n",
        "empty.txt": b"",
        "latin1.txt": "caf\xe9\n".encode("latin-1"),
        "binary.txt": bytes(range(256)) * 4,
        "nul.txt": b"a\x00b\n",
        "long.txt": b"word " * 20_000 + b"\n",
        "crlf.txt": b"one\r\ntwo\r\n",
    }
    paths = {}
    for name, content in files.items():
        (directory / name).write_bytes(content)
        paths[name] = directory / name
    arrays = {
        "index.npy": rng.standard_normal((4, 16), dtype=np.float32),
        "nan.npy": np.full((4, 16), np.nan, np.float32),
        "int8.npy": np.zeros((4, 16), np.int8),
        "float64.npy": np.zeros((4, 16)),
        "rows0.npy": np.zeros((0, 16), np.float32),
        "wide.npy": np.zeros((4, 384), np.float32),
        "one_d.npy": np.zeros(16, np.float32),
        "three_d.npy": np.zeros((2, 2, 16), np.float32),
        "complex.npy": np.zeros((4, 16), np.complex64),
        "fortran.npy": np.asfortranarray(np.zeros((4, 16), np.float32)),
    }
    for name, array in arrays.items():
        np.save(directory / name, array)
        paths[name] = directory / name
    np.save(directory / "object.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    paths["object.npy"] = directory / "object.npy"
    (directory / "truncated.npy").write_bytes((directory / "index.npy").read_bytes()[:150])
    paths["truncated.npy"] = directory / "truncated.npy"
    (directory / "notnpy.npy").write_bytes(b"\x93NUMPY\x01\x00\xff\xff" + b"{" * 100)
    paths["notnpy.npy"] = directory / "notnpy.npy"
    vectors = [rng.standard_normal((n, 16), dtype=np.float32) for n in (3, 1, 5, 2)]
    offsets = np.cumsum([0, *map(len, vectors)]).astype(np.int64)
    np.savez(directory / "multi.npz", vectors=np.concatenate(vectors), offsets=offsets)  # as encode --multi writes
    for name, count in (("multi_dir", 4), ("multi_missing", 2)):  # a directory index, and one missing texts' files
        (directory / name).mkdir()
        np.save(directory / name / "offsets.npy", offsets)
        for i in range(count):
            np.save(directory / name / f"{i:09d}.npy", vectors[i])
        paths[name] = directory / name
    paths["multi.npz"] = directory / "multi.npz"
    (directory / "keep.txt").write_text("the user's file\n")
    paths["keep.txt"] = directory / "keep.txt"
    (directory / "a_dir").mkdir()
    paths["a_dir"] = directory / "a_dir"
    paths["missing"] = directory / "missing.txt"
    paths["/dev/null"] = Path("/dev/null")
    return paths


FILE_OPTIONS = {"--file", "--index", "--texts", "-o", "--output", "--documents", "--multi-index", "--vocab"}
MODEL_OPTIONS = {"--model", "--multi-model"}


def option_values(action, files: dict[str, Path], model_dirs: dict[str, Path]) -> st.SearchStrategy:
    """A value for one option of a command: from its own choices, a file, a model, or a number or text at its edges."""
    option = action.option_strings[-1] if action.option_strings else ""
    if option in FILE_OPTIONS or "file" in option or "index" in option:
        usual = st.sampled_from([str(files["texts.txt"]), str(files["index.npy"]), str(files["keep.txt"])])
        return st.one_of(usual, st.sampled_from(sorted(str(p) for p in files.values())))
    if option in MODEL_OPTIONS:
        return st.sampled_from([str(model_dirs[k]) for k in TEXT_MODELS] + ["", "/etc", "no/such/model"])
    if action.choices:
        choices = st.sampled_from(sorted(map(str, action.choices)))
        return st.one_of(choices, choices, choices, st.just("nope"))
    usual = st.sampled_from(["1", "3", "8"])
    return st.one_of(usual, usual, st.sampled_from([str(v) for v in HOSTILE_NUMBERS]), texts(long=False))


# each command -> how its arguments are drawn (from its parser's own options, with the files and models above)
COMMAND_INPUTS = {
    name: "options"
    for name in ("tokenize", "encode", "neighbors", "similarity", "search", "fill-mask", "classify", "ner", "qa",
                 "rerank", "plot")
}  # fmt: skip
COMMAND_INPUTS["serve"] = "parse only"  # a server that starts would not end: its answers are the HTTP routes' test
COMMAND_INPUTS["download"] = "parse only"  # it reaches for the hub: tests/test_offline.py runs it on a local one


def as_argument(text: str) -> str:
    """`text` as a process's argument can hold it: no NUL, and bytes that are not UTF-8 as Python decodes them
    (surrogateescape: U+DC80..U+DCFF), so no other lone surrogate."""
    return "".join(c if not 0xD800 <= ord(c) <= 0xDFFF else chr(0xDC80 + ord(c) % 128) for c in text.replace("\0", ""))


def command_arguments(data, command: str, files, model_dirs) -> list[str]:
    from numbert.cli import build_parser

    parser = build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    argv = [command]
    for action in parser._actions:
        if not action.option_strings:
            n = {None: 1, "?": data.draw(st.integers(0, 1)), "*": data.draw(st.integers(0, 2)), "+": 1}.get(
                action.nargs, action.nargs if isinstance(action.nargs, int) else 1
            )
            argv += [as_argument(data.draw(texts(), action.dest)) for _ in range(n)]
            continue
        given = action.required or data.draw(st.integers(0, 3), action.option_strings[-1]) == 0  # one in four
        if "--help" in action.option_strings or not given:
            continue
        if action.nargs == 0:
            argv.append(action.option_strings[-1])
        else:
            value = data.draw(option_values(action, files, model_dirs), action.option_strings[-1])
            argv += [action.option_strings[-1], as_argument(value)]
    if "--model" not in argv and command != "serve":
        argv += ["--model", str(model_dirs[data.draw(st.sampled_from(TEXT_MODELS), "model")])]
    return argv


def run_command(argv: list[str], stdin: bytes) -> tuple[int, str]:
    """`numbert ARGV` in this process: (exit status, stderr)."""
    from numbert.cli import main

    err = io.StringIO()
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    saved = sys.stdin, sys.stdout
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    sys.stdout = out
    try:
        with contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as e:
                status = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stdin, sys.stdout = saved
    return status, err.getvalue()


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@budget(150)
@given(st.data())
def test_a_command_answers_or_refuses_in_one_line(model_dirs, tmp_path_factory, data):
    workdir = tmp_path_factory.mktemp("command")
    files = write_inputs(workdir)
    command = data.draw(st.sampled_from(sorted(COMMAND_INPUTS)), "command")
    argv = command_arguments(data, command, files, model_dirs)
    if COMMAND_INPUTS[command] == "parse only":
        from numbert.cli import build_parser

        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
            build_parser().parse_args(argv)
        assert "Traceback" not in err.getvalue() and len(err.getvalue().splitlines()) <= 1, err.getvalue()
        return
    before = snapshot(workdir)
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        with time_bound():
            status, err = run_command(argv, b"The cat sat on the mat.\n")
    finally:
        os.chdir(cwd)
    event(f"{command}: {status} {err.strip()[:60]}")
    assert "Traceback" not in err, f"numbert {argv}: {err}"
    if status != 0:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("numbert"), f"numbert {argv}: {status} {err!r}"
        assert snapshot(workdir) == before, f"numbert {argv} failed and changed the user's files"
    else:  # a success replaces at most the -o OUT the user named, whole
        named = {str(Path(workdir, argv[i + 1])) for i, a in enumerate(argv[:-1]) if a in ("-o", "--output")}
        after = snapshot(workdir)
        changed = [p for p in before if p not in named and after.get(p) != before[p]]
        assert not changed, f"numbert {argv} changed {changed}"


# --- the HTTP routes ----------------------------------------------------------------------------------------------

SERVED = {"bert": "bert", "st": "sentence-transformers", "cross": "cross-encoder", "splade": "splade",
          "colbert": "colbert", "m3": "bge-m3", "jina": "jina-adapters"}  # fmt: skip
EXCEPTION_NAME = re.compile(r"\b(Traceback|[A-Z][A-Za-z]*(Error|Exception)|Errno)\b")


@pytest.fixture(scope="module")
def http(model_dirs):
    """One server of a model of each kind, in this process (Starlette's TestClient), and its OpenAPI document."""
    from starlette.testclient import TestClient

    from numbert.serve.app import create_app
    from numbert.serve.settings import Settings

    more = {name: str(model_dirs[kind]) for name, kind in SERVED.items() if name != "st"}
    settings = Settings(
        model=str(model_dirs["sentence-transformers"]), served_model_name="st", more_models=more,
        max_client_batch_size=8, payload_limit=200_000,
    )  # fmt: skip
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        deadline = time.monotonic() + 60
        while (health := client.get("/health")).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert health.status_code == 200, health.text
        yield Served(client, client.get("/openapi.json").json())


class Served(tuple):
    """(the test client, the OpenAPI document), shown short in a failure's report."""

    def __new__(cls, client, described):
        return super().__new__(cls, (client, described))

    def __repr__(self) -> str:
        return "Served(client, openapi)"


def openapi_path(path: str) -> str:
    return path.replace("{model:path}", "{model}")


model_names = st.one_of(
    *[st.sampled_from(sorted(SERVED))] * 3,
    st.sampled_from(["", "nope", "../st", "st/", "%2e%2e", "a/b/c"]),
    st.text(max_size=40).filter(lambda s: "?" not in s and "#" not in s),
    st.just("x" * 5_000),  # quoted back at most 80 characters long (a URL of 100,000 the client refuses)
)
raw_bodies = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"", b"{", b"[]", b"null", b'"x"', b'{"inputs": NaN}', b'{"input": Infinity}', b"[" * 10_000,
                     b'{"inputs": "\\ud800"}', b'{"inputs": 1e400}', b'{"a": 1, "a": 2}']),
)  # fmt: skip


def check_answer(response, route: str, operation: dict, described: dict, what: str) -> None:
    assert response.status_code < 500 or response.status_code in (503, 504), f"{what}: {response.status_code}"
    kind = response.headers.get("content-type", "")
    if "json" not in kind:
        return
    body = strict_json(response.text)
    if response.status_code >= 400:
        message = body.get("error", {}) if isinstance(body, dict) else None
        message = message.get("message", message) if isinstance(message, dict) else message
        assert isinstance(message, str) and message and "\n" not in message, f"{what}: {response.text[:300]}"
        assert not EXCEPTION_NAME.search(message), f"{what}: a Python exception named: {message[:300]}"
        return
    schema = operation["responses"].get(str(response.status_code), {}).get("content", {}).get("application/json")
    if schema is not None:
        resolver = {"components": described["components"], **schema["schema"]}
        jsonschema.validate(body, resolver)


@budget(400)
@given(st.data())
def test_a_route_answers_strict_json_and_never_a_500(http, data):
    client, described = http
    route = data.draw(st.sampled_from(sorted(client.app.routes, key=lambda r: r.path)), "route")
    path = route.path
    method = data.draw(st.sampled_from(sorted(route.methods - {"HEAD"})), "method")
    operation = described["paths"][openapi_path(path)][method.lower()]
    name = data.draw(model_names, "model").encode("utf-8", "surrogatepass")
    url = path.replace("{model:path}", urllib.parse.quote(name, safe="/"))
    if method == "GET":
        response = client.get(url)
    else:
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        bodies = object_of(schema, described["components"]["schemas"], fields={"model": model_names})
        body = data.draw(st.one_of(bodies, bodies, bodies, raw_bodies), "body")
        if isinstance(body, bytes):
            response = client.post(url, content=body, headers={"content-type": "application/json"})
        else:
            content = json.dumps(body, ensure_ascii=data.draw(st.booleans()))
            response = client.post(url, content=content.encode("utf-8", "surrogatepass"),
                                   headers={"content-type": "application/json"})  # fmt: skip
    event(f"{path.removeprefix('/models/{model:path}')}: {response.status_code}")
    check_answer(response, path, operation, described, f"{method} {url}")
