"""docs/cluster.md's Spark recipe, run as written on a local[2] Spark session.

The code under `<!-- engine: spark -->` in docs/cluster.md is executed here (not copied): 200 texts of
mixed length go through `mapInPandas` with the packaged MiniLM, and every vector must be `Bert.embed` of
the Arrow batch it was in, bit for bit, and within 1e-6 of `Bert.embed` of the whole list; each Python
worker must run one BLAS thread. Spark listens on 127.0.0.1 only and uses its bundled jars: nothing is
fetched from the network.

The Ray Data recipe beside it is only parsed here: Ray 2.60's gRPC servers (GCS, raylet, workers) bind
every network interface whatever node address they are given, and servers in numbert's tests listen on
127.0.0.1 only. It was run by hand (Ray 2.60, two actors, the same checks) when it was written.

A missing PySpark or Java skips with the reason, which NUMBERT_REQUIRE_PARITY=1 (CI) turns into a
failure: CI installs the [spark] extra and has Java 17.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import numbert

pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

DOC = Path(__file__).resolve().parent.parent / "docs" / "cluster.md"
N = 200
START_SECONDS, RUN_SECONDS = 120, 300  # bounds on starting an engine and on one job (a hang fails, never blocks)


def recipe(engine: str) -> dict:
    """The namespace the docs' `<!-- engine: ENGINE -->` python block defines."""
    text = DOC.read_text(encoding="utf-8")
    found = re.findall(rf"^<!-- engine: {engine} -->\n```python\n(.*?)^```$", text, re.M | re.S)
    assert len(found) == 1, f"docs/cluster.md should have one python block under <!-- engine: {engine} -->"
    namespace = {"__name__": f"cluster_md_{engine}"}  # not importable: engines pickle its classes by value
    exec(compile(found[0], f"{DOC.name} <!-- engine: {engine} -->", "exec"), namespace)
    return namespace


def corpus(n: int = N) -> list[str]:
    """Mixed lengths, from no words to past 128 tokens (truncated), with accents and CJK."""
    rng = np.random.default_rng(17)
    words = "the bank river money vault café naïve 東京 data vector model sentence engine".split()
    lengths = [0, 1, 3, 8, 20, 60, 150]
    return [" ".join([f"text{i}", *rng.choice(words, int(rng.choice(lengths)))]) for i in range(n)]


@contextlib.contextmanager
def deadline(seconds: int, what: str):
    """Raise TimeoutError in the main thread if the block takes longer than `seconds`."""

    def expire(signum, frame):
        raise TimeoutError(f"{what} took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check_vectors(ids, batches, vectors, texts, minilm) -> None:
    """Row i (input id ids[i], batch key batches[i]) is Bert.embed of its batch exactly, and of all texts to 1e-6."""
    order = np.argsort(ids)
    ids, batches, vectors = np.asarray(ids)[order], np.asarray(batches)[order], np.stack(vectors)[order]
    assert ids.tolist() == list(range(len(texts))), "every input row comes back once, with its id"
    assert vectors.dtype == np.float32 and vectors.shape == (len(texts), minilm.config.hidden_size)
    keys = sorted(set(batches.tolist()))
    assert len(keys) >= 2, "the job should be split between workers"
    for key in keys:  # rows of one batch, in input order, here on one BLAS thread as each Python worker
        rows = np.flatnonzero(batches == key)
        with threadpool_limits(1):
            assert np.array_equal(vectors[rows], minilm.embed([texts[i] for i in rows])), f"batch {key}"
    whole = minilm.embed(texts)
    assert np.abs(vectors - whole).max() <= 1e-6  # other batches, other padding: the last bits may differ


def test_the_recipes_are_in_the_docs():
    """The blocks parse and define what the tests call, without either engine installed."""
    text = DOC.read_text(encoding="utf-8")
    assert "not tested" not in text
    for engine in ("ray", "spark"):
        block = re.search(rf"^<!-- engine: {engine} -->\n```python\n(.*?)^```$", text, re.M | re.S)
        assert block and "def embed(" in block.group(1) and "ONE_BLAS_THREAD" in block.group(1)
        compile(block.group(1), f"{DOC.name} <!-- engine: {engine} -->", "exec")  # valid Python


# --- Spark ---------------------------------------------------------------------------------------------


def java_problem(env: dict | None = None) -> str | None:
    """Why this machine cannot start Spark's JVM (None if `java -version` says 17 or later)."""
    env = os.environ if env is None else env
    home = env.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java", path=env.get("PATH", ""))
    if not java or not Path(java).exists():
        where = f"JAVA_HOME={home} has no bin/java" if home else "no `java` on PATH and JAVA_HOME is not set"
        return f"Spark needs Java 17 or later: {where} (apt-get install openjdk-17-jre-headless)"
    version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    major = re.search(r'version "(\d+)', version)
    if not major or int(major.group(1)) < 17:
        return f"Spark needs Java 17 or later; {java} -version says: {version.strip()[:200]}"
    return None


def test_a_missing_java_is_named():
    assert "no `java` on PATH and JAVA_HOME is not set" in java_problem({"PATH": "/nonexistent"})
    assert "JAVA_HOME=/nonexistent has no bin/java" in java_problem({"JAVA_HOME": "/nonexistent"})


@pytest.fixture(scope="class")
def spark():
    sql = pytest.importorskip("pyspark.sql", reason="PySpark is not installed: pip install '.[spark]'")
    problem = java_problem()
    if problem:
        pytest.skip(problem)
    cluster = recipe("spark")
    builder = (
        sql.SparkSession.builder.master("local[2]")
        .appName("numbert-test-engines")
        .config(map=cluster["ONE_BLAS_THREAD"])
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "512m")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
    )
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the JVM's own idea of this host's address
        env.setenv("PYSPARK_PYTHON", sys.executable)  # the workers run this interpreter, not `python3` on PATH
        with deadline(START_SECONDS, "starting Spark"):
            session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        try:
            yield session
        finally:
            session.stop()


class TestSpark:
    def test_the_recipe_embeds_like_bert_embed(self, spark, minilm_dir, minilm):
        """mapInPandas with the docs' embed_partition on two partitions; vectors checked row by row."""
        from pyspark.sql.functions import spark_partition_id

        cluster = recipe("spark")
        texts = corpus()
        df = spark.createDataFrame(list(enumerate(texts)), "id long, text string").withColumn(
            "part", spark_partition_id()
        )
        embedded = cluster["embed"](df, str(minilm_dir))
        assert embedded.columns == ["id", "text", "part", "vector"]
        with deadline(RUN_SECONDS, "the Spark job"):
            rows = embedded.collect()
        vectors = [np.asarray(r.vector, dtype=np.float32) for r in rows]  # Spark floats are float32: exact
        check_vectors([r.id for r in rows], [r.part for r in rows], vectors, texts, minilm)

    def test_python_workers_run_one_blas_thread(self, spark):
        """The session configured with the recipe's ONE_BLAS_THREAD: its Python workers' BLAS runs one thread."""

        def probe(frames):  # pickled by value: imports what it uses
            import os

            import numpy  # noqa: F401  (loads NumPy's BLAS)
            from threadpoolctl import threadpool_info

            blas = max(info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas")
            for frame in frames:
                yield frame.assign(blas=blas, env=os.environ.get("OPENBLAS_NUM_THREADS", ""))

        df = spark.range(0, 8, numPartitions=2)
        with deadline(RUN_SECONDS, "the Spark probe"):
            rows = df.mapInPandas(probe, "id long, blas long, env string").collect()
        assert {(r.blas, r.env) for r in rows} == {(1, "1")}

    def test_the_workers_import_this_numbert(self, spark):
        """The workers import the numbert under test (not another copy)."""

        def where(frames):
            import numbert

            for frame in frames:
                yield frame.assign(path=numbert.__file__)

        with deadline(RUN_SECONDS, "the Spark probe"):
            rows = spark.range(0, 2, numPartitions=1).mapInPandas(where, "id long, path string").collect()
        assert {r.path for r in rows} == {numbert.__file__}
