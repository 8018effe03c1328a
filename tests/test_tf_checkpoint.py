"""Google's TensorFlow checkpoints without TensorFlow: the tensor-bundle reader, CRC-32C, names, parity, refusals.

tests/fixtures/tf_bert was written by TensorFlow 2.21's tf.compat.v1.train.Saver (scripts/make_tf_fixture.py)
in the layout of Google's BERT release, with Adam slots and global_step; tf_bert_sharded holds the same model
variables saved over two devices (two data shards); tf_bert_tensors.npz is what TensorFlow read back.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_matches_reference, run_with_memory_limit

import numbert
from numbert.checkpoint.crc32c import crc32c, masked
from numbert.checkpoint.model_config import read_config
from numbert.checkpoint.tf_bundle import CheckpointError, latest_checkpoint, read_bundle, read_index
from numbert.checkpoint.tf_names import read_tf_checkpoint, transformers_name
from numbert.checkpoint.weights import Checkpoint, load_weights, read_checkpoint
from numbert.model.config import BertConfig, config_file, google_release_lowercases
from numbert.testing import (
    block_handles,
    field,
    random_weights,
    table_block,
    table_file,
    varint,
    write_google_bert,
    write_random_bert,
    write_tensor_bundle,
)

FIXTURES = Path(__file__).parent / "fixtures"
TF_DIR = FIXTURES / "tf_bert"
SHARDED_DIR = FIXTURES / "tf_bert_sharded"
PREFIX = TF_DIR / "bert_model.ckpt"
TEXTS = ["the bank of the river", "money was not fishing!"]


@pytest.fixture
def tf_copy(tmp_path):
    """A writable copy of the TensorFlow fixture, to corrupt."""
    return shutil.copytree(TF_DIR, tmp_path / "tf_bert")


# ---------------------------------------------------------------------------------------------
# CRC-32C


def crc32c_bytewise(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


@pytest.fixture(params=["numpy", "google_crc32c"], autouse=True)
def crc_implementation(request, monkeypatch):
    """Every test runs with both CRC-32C implementations: NumPy's own and the optional google_crc32c."""
    import numbert.checkpoint.crc32c

    if request.param == "numpy":
        monkeypatch.setattr(numbert.checkpoint.crc32c, "_hardware_crc32c", lambda: None)
    else:
        assert numbert.checkpoint.crc32c._hardware_crc32c() is not None, (
            "google-crc32c (a test dependency) is not installed"
        )
    return request.param


def test_crc32c_known_values():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc32c(b"") == 0
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4: 32 bytes of zeros
    assert crc32c(bytes([0xFF] * 32)) == 0x62A8AB43  # RFC 3720 B.4: 32 bytes of 0xff


@pytest.mark.parametrize("n", [1, 7, 255, 256, 1000, 4097, 65539, 300_001])
def test_crc32c_chunked_matches_bitwise(n):
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    expected = crc32c_bytewise(data[:4097].tobytes()) if n <= 4097 else None
    got = crc32c(data)
    if expected is not None:
        assert got == expected
    # the same bytes as one array, as bytes, and unaligned inside a larger buffer agree
    assert crc32c(data.tobytes()) == got
    assert crc32c(np.concatenate([np.uint8([7]), data])[1:]) == got


def test_crc32c_large_input_matches_crc_of_concatenation():
    """20 MB runs the 65536 side-by-side registers and the combine; check against combining two halves."""
    from numbert.checkpoint.crc32c import raw_crc, shift

    data = np.random.default_rng(0).integers(0, 256, 20_000_003, dtype=np.uint8)
    a, b = data[:123_457], data[123_457:]
    assert raw_crc(data) == shift(raw_crc(a), b.size) ^ raw_crc(b)
    assert raw_crc(data[:100_000]) == shift(raw_crc(data[:60_000]), 40_000) ^ raw_crc(data[60_000:100_000])
    assert crc32c(data[:5000]) == crc32c_bytewise(data[:5000].tobytes())


def test_masked_crc_matches_tensorflow():
    """The fixture's stored crcs were computed by TensorFlow; every tensor's must match ours."""
    _, entries = read_index(PREFIX)
    data = (TF_DIR / "bert_model.ckpt.data-00000-of-00001").read_bytes()
    for name, entry in entries.items():
        assert masked(crc32c(data[entry.offset : entry.offset + entry.size])) == entry.crc32c, name


# ---------------------------------------------------------------------------------------------
# Reading what TensorFlow wrote


def test_index_lists_model_variables_adam_slots_and_global_step():
    num_shards, entries = read_index(PREFIX)
    assert num_shards == 1
    assert len(entries) == 139  # 46 model variables, 2 Adam slots each, global_step
    assert sum(name.endswith(("/adam_m", "/adam_v")) for name in entries) == 92
    assert entries["bert/encoder/layer_1/intermediate/dense/kernel"].shape == (32, 64)  # (in, out)
    tensors = read_bundle(PREFIX, select=lambda name: name == "global_step")
    step, dtype = tensors["global_step"]
    assert dtype == "I64" and step.shape == () and int(step) == 1000


def test_reader_gives_exactly_what_tensorflow_reads():
    expected = np.load(FIXTURES / "tf_bert_tensors.npz")
    for prefix in (PREFIX, SHARDED_DIR / "bert_model.ckpt"):
        tensors = read_bundle(prefix, select=lambda name: name in expected.files)
        assert sorted(tensors) == sorted(expected.files)
        for name in expected.files:
            array, dtype = tensors[name]
            assert dtype == "F32" and not array.flags.writeable
            np.testing.assert_array_equal(array, expected[name], err_msg=name)


def test_multi_shard_checkpoint_spreads_tensors_over_both_shards():
    num_shards, entries = read_index(SHARDED_DIR / "bert_model.ckpt")
    assert num_shards == 2 and {e.shard_id for e in entries.values()} == {0, 1}
    sharded = load_weights(SHARDED_DIR, read_config(config_file(SHARDED_DIR)))
    single = load_weights(TF_DIR, read_config(config_file(TF_DIR)))
    for name in single:
        np.testing.assert_array_equal(sharded[name], single[name], err_msg=name)


def test_google_names_map_onto_transformers_names():
    assert transformers_name("bert/embeddings/word_embeddings") == "bert.embeddings.word_embeddings.weight"
    assert transformers_name("bert/embeddings/LayerNorm/gamma") == "bert.embeddings.LayerNorm.weight"
    assert (
        transformers_name("bert/encoder/layer_11/attention/self/query/kernel")
        == "bert.encoder.layer.11.attention.self.query.weight"
    )
    assert (
        transformers_name("bert/encoder/layer_0/output/LayerNorm/beta") == "bert.encoder.layer.0.output.LayerNorm.bias"
    )
    assert transformers_name("bert/pooler/dense/bias") == "bert.pooler.dense.bias"
    assert transformers_name("cls/predictions/output_bias") == "cls.predictions.bias"
    assert (
        transformers_name("cls/predictions/transform/LayerNorm/gamma") == "cls.predictions.transform.LayerNorm.weight"
    )
    assert transformers_name("cls/seq_relationship/output_weights") == "cls.seq_relationship.weight"
    assert transformers_name("output_weights") == "classifier.weight"  # run_classifier.py
    assert transformers_name("cls/squad/output_bias") == "qa_outputs.bias"  # run_squad.py
    for skipped in ("global_step", "bert/pooler/dense/kernel/adam_m", "bert/pooler/dense/bias/adam_v"):
        assert transformers_name(skipped) is None


def test_kernels_are_transposed_seq_relationship_is_not():
    expected = np.load(FIXTURES / "tf_bert_tensors.npz")
    tensors = read_tf_checkpoint(PREFIX)
    np.testing.assert_array_equal(
        tensors["bert.encoder.layer.1.intermediate.dense.weight"],
        expected["bert/encoder/layer_1/intermediate/dense/kernel"].T,
    )
    assert tensors["bert.encoder.layer.1.intermediate.dense.weight"].shape == (64, 32)  # (out, in)
    np.testing.assert_array_equal(
        tensors["cls.seq_relationship.weight"], expected["cls/seq_relationship/output_weights"]
    )
    assert not any("adam" in name or "global_step" in name for name in tensors)


@pytest.mark.parity
def test_names_are_those_of_transformers_bert_for_pretraining(transformers, torch):
    """Every mapped tensor loads into BertForPreTraining; only the tied decoder weight (and buffers) is left."""
    config = transformers.BertConfig(**json.loads((TF_DIR / "bert_config.json").read_text()))
    model = transformers.BertForPreTraining(config)
    tensors = {name: torch.from_numpy(np.array(t)) for name, t in read_tf_checkpoint(PREFIX).items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    assert unexpected == []
    assert set(missing) <= {
        "cls.predictions.decoder.weight",
        "cls.predictions.decoder.bias",
        "bert.embeddings.position_ids",
        "bert.embeddings.token_type_ids",
    }


def transformers_bert(transformers, torch, tensors: dict[str, np.ndarray]):
    """transformers' BertModel from bert_config.json, given the weights our reader mapped."""
    config = transformers.BertConfig(**json.loads((TF_DIR / "bert_config.json").read_text()))
    model = transformers.BertModel(config, add_pooling_layer=True).eval()
    state = {
        name.removeprefix("bert."): torch.from_numpy(np.array(t))
        for name, t in tensors.items()
        if name.startswith("bert.")
    }
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all("position_ids" in m or "token_type_ids" in m for m in missing)
    return model


@pytest.mark.parity
def test_hidden_states_and_pooler_match_transformers(transformers, torch):
    model = numbert.load(TF_DIR)
    reference = transformers_bert(transformers, torch, read_tf_checkpoint(PREFIX))
    ours = model(TEXTS)
    assert_matches_reference(torch, reference, ours, atol=2e-5)


def test_config_is_bert_config_json_with_berts_defaults():
    assert config_file(TF_DIR).name == "bert_config.json"
    config = read_config(config_file(TF_DIR))
    assert (config.layer_norm_eps, config.pad_token_id, config.hidden_act) == (1e-12, 0, "gelu")
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (32, 2, 60)


# ---------------------------------------------------------------------------------------------
# Where the checkpoint is: directory, prefix, .index file, archives


def reference_vectors():
    return numbert.load(TF_DIR)(TEXTS).hidden_states


@pytest.mark.parametrize("where", ["bert_model.ckpt", "bert_model.ckpt.index", "."])
def test_loads_from_directory_prefix_and_index_file(where):
    np.testing.assert_array_equal(numbert.load(TF_DIR / where)(TEXTS).hidden_states, reference_vectors())


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_loads_from_a_release_archive(tmp_path, monkeypatch, kind):
    """Google published `uncased_L-12_H-768_A-12.zip`: one folder holding the checkpoint."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive = tmp_path / f"uncased_L-2_H-32_A-4.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            for f in TF_DIR.iterdir():
                z.write(f, f"uncased_L-2_H-32_A-4/{f.name}")
    else:
        with tarfile.open(archive, "w:gz") as t:
            t.add(TF_DIR, "uncased_L-2_H-32_A-4")
    for _ in range(2):  # the second load reuses the unpacked copy
        np.testing.assert_array_equal(numbert.load(archive)(TEXTS).hidden_states, reference_vectors())
    assert len(list((tmp_path / "cache" / "numbert" / "archives").iterdir())) == 1


def test_archive_escaping_its_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("../outside.txt", "x")
    with pytest.raises(ValueError, match="outside"):
        numbert.load(archive)
    assert not (tmp_path / "cache" / "numbert" / "outside.txt").exists()


def test_directory_with_several_checkpoints_follows_its_checkpoint_file(tmp_path):
    d = shutil.copytree(TF_DIR, tmp_path / "run")
    for suffix in ("index", "data-00000-of-00001"):
        shutil.copy(d / f"bert_model.ckpt.{suffix}", d / f"model.ckpt-2000.{suffix}")
    (d / "checkpoint").write_text(
        'model_checkpoint_path: "/elsewhere/model.ckpt-2000"\nall_model_checkpoint_paths: "bert_model.ckpt"\n'
    )
    assert latest_checkpoint(d) == d / "model.ckpt-2000"  # a stale absolute path: found by its name
    (d / "checkpoint").unlink()
    with pytest.raises(ValueError, match="several TensorFlow checkpoints.*name one by its prefix"):
        load_weights(d, read_config(config_file(d)))
    np.testing.assert_array_equal(numbert.load(d / "model.ckpt-2000")(TEXTS).hidden_states, reference_vectors())


@pytest.mark.parametrize("directory", [TF_DIR, SHARDED_DIR])
def test_checkpoint_lists_the_index_every_data_shard_and_the_config(directory):
    checkpoint = Checkpoint.find(directory)
    shards = sorted(p.name for p in directory.glob("bert_model.ckpt.data-*"))
    assert checkpoint.format == "tensorflow" and len(shards) == (2 if directory == SHARDED_DIR else 1)
    assert [p.name for p in checkpoint.files] == ["bert_model.ckpt.index", *shards]
    assert checkpoint.config_file == directory / "bert_config.json"
    assert checkpoint.location == directory / "bert_model.ckpt"
    assert Checkpoint.find(directory / "bert_model.ckpt") == Checkpoint.find(directory / "bert_model.ckpt.index")
    assert Checkpoint.find(directory / "bert_model.ckpt") == checkpoint
    assert set(checkpoint.fingerprint()) == {"bert_model.ckpt.index", *shards, "bert_config.json"}


def test_a_changed_byte_of_a_data_shard_changes_its_fingerprint(tf_copy):
    before = Checkpoint.find(tf_copy).fingerprint()
    data = tf_copy / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:-1] + bytes([data.read_bytes()[-1] ^ 1]))
    after = Checkpoint.find(tf_copy).fingerprint()
    assert [name for name in before if before[name] != after[name]] == [data.name]


# ---------------------------------------------------------------------------------------------
# Refusals: each names the file, and the tensor where there is one


def test_truncated_data_shard_names_file_and_tensor(tf_copy):
    data = tf_copy / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:-1000])
    with pytest.raises(CheckpointError, match=r"data-00000-of-00001 is truncated: tensor '[^']+' needs bytes"):
        read_checkpoint(tf_copy)


def test_bad_crc_names_file_and_tensor(tf_copy):
    """Checked by default with either CRC-32C (NumPy's own costs about 1.5 s for bert-base): a flipped bit
    used to load silently without google-crc32c."""
    _, entries = read_index(tf_copy / "bert_model.ckpt")
    entry = entries["bert/encoder/layer_1/attention/self/key/kernel"]
    data = tf_copy / "bert_model.ckpt.data-00000-of-00001"
    raw = bytearray(data.read_bytes())
    raw[entry.offset + 17] ^= 0x01  # one bit of one float
    data.write_bytes(bytes(raw))
    config = read_config(config_file(tf_copy))
    message = (
        r"data-00000-of-00001 is corrupt: tensor 'bert/encoder/layer_1/attention/self/key/kernel' "
        r"fails its CRC-32C check"
    )
    with pytest.raises(CheckpointError, match=message):
        load_weights(tf_copy, config)
    with pytest.raises(CheckpointError, match=message):
        numbert.load(tf_copy)
    # without the check the flipped bit goes through (sizes and bounds are still checked)
    weights = load_weights(tf_copy, config, verify_crc=False)
    assert weights["encoder.layer.1.attention.self.key.weight"].shape == (32, 32)


def test_bad_crc_in_an_optimizer_slot_is_not_read(tf_copy):
    """Adam slots are skipped unread: a flipped bit there does not stop the model loading."""
    _, entries = read_index(tf_copy / "bert_model.ckpt")
    entry = entries["bert/pooler/dense/kernel/adam_m"]
    data = tf_copy / "bert_model.ckpt.data-00000-of-00001"
    raw = bytearray(data.read_bytes())
    raw[entry.offset] ^= 0xFF
    data.write_bytes(bytes(raw))
    load_weights(tf_copy, read_config(config_file(tf_copy)), verify_crc=True)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda b: b[:-1], "not a TensorFlow checkpoint index"),  # the magic number is cut
        (
            lambda b: b[:100] + bytes([b[100] ^ 0x40]) + b[101:],
            "is corrupt: the block at bytes 0..\\d+ fails its CRC-32C",
        ),
        (lambda b: b[-48:], "corrupt or truncated: a block at bytes"),  # footer only: blocks point past the end
        (lambda b: b"", "not a TensorFlow checkpoint index"),
    ],
)
def test_corrupt_index_names_the_file(tf_copy, damage, message):
    index = tf_copy / "bert_model.ckpt.index"
    index.write_bytes(damage(index.read_bytes()))
    with pytest.raises(CheckpointError, match=f"bert_model.ckpt.index .*{message}"):
        numbert.load(tf_copy)


def test_entry_whose_size_disagrees_with_its_shape_names_file_and_tensor(tmp_path):
    prefix = tmp_path / "model.ckpt"
    write_tensor_bundle(
        prefix, {"bert/pooler/dense/bias": (np.zeros(4, np.float32), 1)}, claimed_sizes={"bert/pooler/dense/bias": 20}
    )
    with pytest.raises(
        CheckpointError,
        match=r"model.ckpt.data-00000-of-00001: tensor 'bert/pooler/dense/bias' "
        r"of shape \(4,\) and dtype F32 needs 16 bytes, the index gives 20",
    ):
        read_bundle(prefix)


def test_missing_data_shard_is_named(tmp_path):
    d = shutil.copytree(SHARDED_DIR, tmp_path / "sharded")
    (d / "bert_model.ckpt.data-00001-of-00002").unlink()
    with pytest.raises(FileNotFoundError, match="data shard .*bert_model.ckpt.data-00001-of-00002 is missing"):
        numbert.load(d)


def test_unsupported_and_sliced_tensors_are_refused_by_name(tmp_path):
    prefix = tmp_path / "model.ckpt"
    write_tensor_bundle(prefix, {"weird": (np.zeros(3, np.complex64), 8)})  # DT_COMPLEX64
    with pytest.raises(
        CheckpointError,
        match=r"model.ckpt.data-00000-of-00001: tensor 'weird' has unsupported "
        r"TensorFlow dtype 8",
    ):
        read_bundle(prefix)


# ---------------------------------------------------------------------------------------------
# Hand-written bundles: many index blocks, half precision


def test_many_blocks_and_half_precision_widen_to_float32(tmp_path):
    rng = np.random.default_rng(0)
    half = rng.standard_normal((3, 5)).astype(np.float16)
    bf16 = (rng.standard_normal(7).astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
    tensors = {
        f"bert/encoder/layer_{i}/output/dense/bias": (rng.standard_normal(4).astype(np.float32), 1) for i in range(12)
    }
    tensors["bert/pooler/dense/kernel"] = (half, 19)
    tensors["cls/predictions/output_bias"] = ((bf16.view(np.uint32) >> 16).astype(np.uint16), 14)
    prefix = tmp_path / "model.ckpt"
    write_tensor_bundle(prefix, tensors, entries_per_block=2)  # 8 data blocks
    read = read_tf_checkpoint(prefix)
    assert len(read) == 14
    for i in range(12):
        np.testing.assert_array_equal(
            read[f"bert.encoder.layer.{i}.output.dense.bias"], tensors[f"bert/encoder/layer_{i}/output/dense/bias"][0]
        )
    assert read["bert.pooler.dense.weight"].dtype == np.float32
    np.testing.assert_array_equal(read["bert.pooler.dense.weight"], half.astype(np.float32).T)
    np.testing.assert_array_equal(read["cls.predictions.bias"], bf16)


def test_google_layout_writer_round_trips_through_the_reader(tmp_path, vocab_path):
    """numbert.testing.write_google_bert (used by the load benchmark) writes what the reader maps back exactly."""
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    google = write_google_bert(tmp_path / "google", vocab_path, config, seed=3)
    loaded = load_weights(google, read_config(config_file(google)))
    expected = random_weights(config, seed=3)
    assert list(loaded) == list(expected)
    for name, w in expected.items():
        np.testing.assert_array_equal(loaded[name], w, err_msg=name)
    ours = numbert.load(google)(TEXTS)
    reference = numbert.load(write_random_bert(tmp_path / "hf", vocab_path, config, seed=3))(TEXTS)
    np.testing.assert_allclose(ours.hidden_states, reference.hidden_states, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "folder, tokens",
    [
        ("uncased_L-2_H-32_A-4", ["[CLS]", "the", "bank", "[SEP]"]),
        ("cased_L-2_H-32_A-4", ["[CLS]", "[UNK]", "bank", "[SEP]"]),  # "The" is kept as it is: not in this vocab
        ("multi_cased_L-2_H-32_A-4", ["[CLS]", "[UNK]", "bank", "[SEP]"]),
        ("my-bert", ["[CLS]", "the", "bank", "[SEP]"]),  # not a release name: BERT's default, lowercase
    ],
)
def test_google_release_casing_follows_its_folder_name(tmp_path, folder, tokens):
    """Google's releases have no tokenizer config; their folder name says cased or uncased, as
    google-research/bert's validate_case_matches_checkpoint reads it."""
    d = shutil.copytree(TF_DIR, tmp_path / folder)
    assert numbert.load(d / "bert_model.ckpt")("The bank").tokens == tokens
    assert google_release_lowercases(d) is (None if folder == "my-bert" else tokens[1] == "the")


def test_unsupported_dtype_of_a_tensor_not_read_does_not_matter(tmp_path):
    prefix = tmp_path / "model.ckpt"
    write_tensor_bundle(
        prefix,
        {"bert/pooler/dense/bias": (np.ones(4, np.float32), 1), "some/string_table": (np.zeros(3, np.complex64), 7)},
    )  # DT_STRING
    tensors = read_bundle(prefix, select=lambda name: name.startswith("bert/"))
    np.testing.assert_array_equal(tensors["bert/pooler/dense/bias"][0], np.ones(4, np.float32))


# ---------------------------------------------------------------------------------------------
# Hostile indexes: each costs no more than its size, and each refusal names the file (and the tensor)

HEADER = (b"", field(1, 1))  # BundleHeaderProto: one data shard
SCALAR = field(1, 1) + field(5, 4)  # a float32 scalar at offset 0 (its CRC-32C is not checked here)


def write_index(tmp_path, blocks: list[bytes], index: list[tuple[bytes, bytes]] | None = None):
    """A checkpoint whose `.index` holds `blocks` (by default each listed once under a last key "~i") and
    whose data shard holds 4 zero bytes; returns its prefix."""
    prefix = tmp_path / "model.ckpt"
    handles = block_handles(blocks)
    index_path = tmp_path / "model.ckpt.index"
    index_path.write_bytes(table_file(blocks, index or [(b"~%d" % i, h) for i, h in enumerate(handles)]))
    (tmp_path / "model.ckpt.data-00000-of-00001").write_bytes(bytes(4))
    return prefix


def test_keys_rebuilt_past_the_file_size_are_refused_without_building_them(tmp_path):
    """Each key the previous one plus a byte: 6 bytes of a 0.6 MB file per key, 5 GB of keys. In a
    process capped at 1.5 GB the refusal comes before the keys do."""
    entries = [varint(0) + varint(0) + varint(len(HEADER[1])) + HEADER[1]]
    entries += [varint(n) + varint(1) + varint(0) + b"a" for n in range(100_000)]
    block = b"".join(entries) + (0).to_bytes(4, "little") + (1).to_bytes(4, "little")  # one restart point, at 0
    prefix = write_index(tmp_path, [block])
    assert (tmp_path / "model.ckpt.index").stat().st_size < 600_000
    last_line = run_with_memory_limit(
        f"from numbert.checkpoint.tf_bundle import read_index; read_index({str(prefix)!r})"
    )
    assert last_line.startswith(
        f"numbert.checkpoint.tf_bundle.CheckpointError: {prefix}.index is corrupt: the keys of a block of {len(block)} "
        f"bytes would total more than 64 times that, after key 'aaaa"
    ), last_line


@pytest.mark.parametrize(
    "layout, message",
    [
        ("the same block twice", r"lists the data block at bytes 0..\d+ after one ending at byte \d+"),
        ("blocks out of file order", r"lists the data block at bytes 0..\d+ after one ending at byte \d+"),
        ("a block inside another", r"lists the data block at bytes 1..\d+ after one ending at byte \d+"),
    ],
)
def test_data_blocks_listed_twice_out_of_order_or_overlapping_are_refused(tmp_path, layout, message):
    """An index of 200 KB listing one data block 20,000 times took 45 s to parse, and was accepted."""
    blocks = [table_block([HEADER, (b"a", SCALAR)]), table_block([(b"b", SCALAR)])]
    first, second = block_handles(blocks)
    handles = {
        "the same block twice": [first, first],
        "blocks out of file order": [second, first],
        "a block inside another": [first, varint(1) + varint(len(blocks[0]) - 1)],
    }[layout]
    prefix = write_index(tmp_path, blocks, [(b"~0", handles[0]), (b"~1", handles[1])])
    with pytest.raises(CheckpointError, match=rf"{prefix}.index is corrupt: its index block {message}"):
        read_index(prefix)


@pytest.mark.parametrize(
    "keys, message",
    [
        ([b"w", b"w"], "the entry for tensor 'w' is listed twice"),
        ([b"w", b"v"], "the entry for tensor 'v' comes after 'w'"),
        ([b"", b"w"], "the entry for tensor '' is listed twice"),  # a second bundle header
    ],
)
def test_a_repeated_or_out_of_order_key_is_refused_by_name(tmp_path, keys, message):
    """A key listed twice used to be read twice, the last one winning."""
    prefix = write_index(tmp_path, [table_block([HEADER] + [(key, SCALAR) for key in keys])])
    with pytest.raises(CheckpointError, match=rf"{prefix}.index is corrupt: {message} \(a table's keys are sorted"):
        read_index(prefix)


def test_a_tensor_of_more_dims_than_numpy_has_is_named(tmp_path):
    entry = field(1, 1) + field(2, b"".join(field(2, field(1, 1)) for _ in range(65))) + field(5, 4)
    prefix = write_index(tmp_path, [table_block([HEADER, (b"w", entry)])])
    with pytest.raises(CheckpointError, match=r"model.ckpt.data-00000-of-00001: tensor 'w' has 65 dims; NumPy"):
        read_bundle(prefix, verify_crc=False)
