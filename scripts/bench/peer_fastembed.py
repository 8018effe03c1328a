"""fastembed (Qdrant's ONNX Runtime embedder, the no-torch peer users pick first) on the bench's corpus.

fastembed pins its own onnxruntime, NumPy and tokenizers, so it never goes into numbert's environment. The parent
(numbert's venv, scripts/bench_workers.py and scripts/bench_corpus.py) makes a venv of its own under the bench cache
once (`python -m venv` + `pip install fastembed==VERSION` from the package registry), exports the same model to ONNX
with torch (bench.systems.ensure_onnx: transformers' BertModel, outputs last_hidden_state and pooler_output),
quantizes it to int8 with ONNX Runtime's quantize_dynamic, writes the corpus to a file, and runs this file as the
child in that venv. The child registers the model as a fastembed custom model (mean pooling, normalized: how
fastembed itself registers sentence-transformers/all-MiniLM-L6-v2) and loads it from the local directory
(`specific_model_path`): no hub. Its vectors come back to the parent, which checks them against numbert's.

Its recipe (RECIPES): fastembed's own batching (input order, each batch padded to its longest text), the batch
size and the threading that were fastest here on 2 cores (docs/performance.md says which were tried).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1]
VERSION = "0.9.1"
# system -> (ONNX file in the model directory, batch size, parallel: None = one process on ORT's threads)
RECIPES = {
    "fastembed": ("onnx/model.onnx", 32, None),
    "fastembed int8": ("onnx/model-int8.onnx", 64, 2),
}
# the model's tokenizer and configuration files fastembed reads, beside the weights the export reads
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def venv_dir() -> Path:
    from bench.harness import CACHE

    return CACHE / "fastembed-venv"


def ensure_venv(venv: Path, python: str = sys.executable) -> tuple[Path | None, str]:
    """(the venv's python, "") once fastembed imports there, made on first use; else (None, why not)."""
    bin_python = venv / "bin" / "python"
    check = [str(bin_python), "-c", f"import fastembed, sys; sys.exit(fastembed.__version__ != {VERSION!r})"]
    if bin_python.is_file() and subprocess.run(check, capture_output=True).returncode == 0:
        return bin_python, ""
    steps = [
        [python, "-m", "venv", str(venv)],
        [str(bin_python), "-m", "pip", "install", "--quiet", f"fastembed=={VERSION}"],
    ]
    for step in steps:
        print(f"  fastembed: {' '.join(step)}", file=sys.stderr, flush=True)
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as error:
            return None, f"cannot make fastembed's venv at {venv}: {error}"
        if done.returncode != 0:
            last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
            return None, f"cannot make fastembed's venv at {venv}: {' '.join(step[:3])} failed: {last[0]}"
    if subprocess.run(check, capture_output=True).returncode != 0:
        return None, f"fastembed {VERSION} does not import in {venv}"
    return bin_python, ""


def export_directory(source: Path) -> Path:
    """A directory of the bench's own (never inside an installed package): links to the model's files, its ONNX
    export and the int8 quantization of it, made once. The export needs torch, onnx and onnxscript, the int8 file
    onnxruntime (pip install numbert[bench]). The ONNX Runtime rows run the same files."""

    from bench.harness import CACHE
    from bench.systems import ensure_onnx

    directory = CACHE / f"export-{source.parent.name}-{source.name}"
    directory.mkdir(parents=True, exist_ok=True)
    for name in (*MODEL_FILES, "model.safetensors"):
        link = directory / name
        if (source / name).exists() and not link.is_symlink():
            link.symlink_to(source / name)
    onnx_path = ensure_onnx(directory)
    if onnx_path is None:
        raise RuntimeError("the ONNX export needs onnxruntime, onnx and onnxscript: pip install numbert[bench]")
    quantized(onnx_path)
    return directory


def run(system: str, args, corpus: list[str], reference: Path) -> dict:
    """One fastembed system in a fresh process of its venv: bench_workers' result dict, or {"skipped": why}."""
    import numpy as np

    if args.model != "minilm":
        return {"skipped": "fastembed runs the packaged all-MiniLM-L6-v2 only (--model minilm)"}
    python, why = ensure_venv(venv_dir())
    if python is None:
        return {"skipped": why}
    from bench.harness import QUIET_ENV
    from bench.systems import model_dir

    try:
        directory = export_directory(model_dir("minilm"))
    except (RuntimeError, ImportError) as error:
        return {"skipped": f"no ONNX export for fastembed: {error}"}
    model_file, batch_size, parallel = RECIPES[system]
    with tempfile.TemporaryDirectory(prefix="numbert-fastembed-") as tmp:
        texts, vectors_path = Path(tmp) / "corpus.json", Path(tmp) / "vectors.npy"
        texts.write_text(json.dumps(corpus))
        request = {
            "model_dir": str(directory),
            "model_file": model_file,
            "batch_size": batch_size,
            "parallel": parallel,
            "repeats": args.repeats,
            "corpus": str(texts),
            "vectors": str(vectors_path),
        }
        env = dict(os.environ, **QUIET_ENV)
        env.pop("PYTHONPATH", None)  # nothing of numbert's environment in fastembed's
        command = [str(python), __file__, json.dumps(request)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{system} failed:\n{done.stderr[-2000:]}")
        result = json.loads(done.stdout.splitlines()[-1])
        vectors = np.load(vectors_path)
    if not reference.exists():
        np.save(reference, vectors)
    expected = np.load(reference)
    cosine = np.sum(vectors * expected, 1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(expected, axis=1)
    return {
        **result,
        "system": system,
        "sentences": len(corpus),
        "min_cosine": float(cosine.min()),
        "mean_cosine": float(cosine.mean()),
        "recipe": f"{model_file}, batch_size={batch_size}, parallel={parallel}",
    }


def child(request: dict) -> dict:
    """In fastembed's venv: the corpus embedded --repeats times after a warm-up, the passes' seconds."""
    import resource
    import time

    import numpy as np
    import onnxruntime
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    sys.path.insert(0, str(SCRIPTS))
    from bench.harness import OtherLoad  # stdlib only

    name = f"numbert-bench/{Path(request['model_file']).stem}"
    TextEmbedding.add_custom_model(
        model=name,
        pooling=PoolingType.MEAN,
        normalization=True,
        sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),  # never fetched: the path is given
        dim=384,
        model_file=request["model_file"],
        output_name="last_hidden_state",
    )
    started = time.perf_counter()
    model = TextEmbedding(model_name=name, specific_model_path=request["model_dir"], threads=request.get("threads"))
    start_seconds = time.perf_counter() - started
    corpus = json.loads(Path(request["corpus"]).read_text())
    options = {"batch_size": request["batch_size"], "parallel": request["parallel"]}
    np.stack(list(model.embed(corpus[:64], **options)))
    seconds, others = [], []
    for _ in range(request["repeats"]):
        with OtherLoad() as load:
            t = time.perf_counter()
            vectors = np.stack(list(model.embed(corpus, **options)))
            seconds.append(time.perf_counter() - t)
        others.append(load.cores)
    np.save(request["vectors"], vectors.astype(np.float32))
    import fastembed

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "seconds": seconds,
        "others": others,
        "start_seconds": start_seconds,
        "memory": [{"rss": rss, "pss": rss}],
        "versions": {"fastembed": fastembed.__version__, "onnxruntime": onnxruntime.__version__},
    }


if __name__ == "__main__":
    print(json.dumps(child(json.loads(sys.argv[1]))))


def quantized(onnx_path: Path) -> Path:
    """The ONNX model with its weights dynamically quantized to int8 (ONNX Runtime's own tool), made once."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    path = onnx_path.with_name("model-int8.onnx")
    if not path.is_file() or path.stat().st_mtime < onnx_path.stat().st_mtime:
        quantize_dynamic(onnx_path, path, weight_type=QuantType.QInt8)
    return path
