"""How fast is numbert? Its forward pass, a real-text corpus and a cold start against transformers & co.

    python scripts/bench                          # the full benchmark, ~10 minutes per BLAS setting
    python scripts/bench --quick                  # a short smoke run (about 2-3 minutes)
    python scripts/bench --rows 8x128,32x128 --threads 2 --json results.json
    python scripts/bench --wait-idle 60           # on a shared machine: skip the rounds others disturbed
    python scripts/bench --from-json results.json  # print a saved report again
    cd scripts && python -m bench --quick         # the same, as a module

Four sections, all on one deterministic random bert-base checkpoint (numbert.testing, cached in
~/.cache/numbert-bench) so that no download is needed and every system runs the same weights:

1. Forward pass at (batch x seq) 1x8, 1x128, 1x512, 8x128, 32x128: numbert, transformers `BertModel`
   (eager and sdpa attention) and ONNX Runtime (the same model exported by this script), timed in
   one process in interleaved rounds (A B C D A B C D ...), medians and ratios. Next to them the
   GEMM bound: the time the forward's matrix products alone take at the rate `np.matmul` reaches on
   those shapes in the same rounds. numbert can only beat it by skipping work, so "share of the
   GEMM bound" says how much of numbert's time is matmul and how much is everything else.
   A cProfile breakdown of numbert's forward then shows where the rest goes.
2. A corpus of 2,000 real English sentences (from the docstrings of Python's standard library):
   `Bert.embed` (length buckets) vs transformers in input-order batches padded to the batch maximum
   vs sentence-transformers `encode`, in sentences per second.
3. Cold start: a fresh process running `numbert encode` on one sentence vs the same with
   transformers, wall time and peak resident memory.

Everything runs twice, each time in a fresh process, because OpenBLAS picks its kernels when it is
loaded: once with the environment as given and once without OPENBLAS_CORETYPE (OpenBLAS then picks
the kernels for this CPU, as on a typical machine). Every system gets the same thread count
(`--threads`, default 2): OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS are set for the
child process before NumPy or torch load, plus torch.set_num_threads and ORT's intra_op_num_threads.
numbert itself never touches these settings.

The package: harness.py (timing helpers, other processes' CPU use, the BLAS and machine report),
systems.py (the checkpoint, the ONNX export and the systems under test), forward.py (section 1 and
the profile), corpus.py (section 2; its docstring corpus is shared with scripts/bench_tokenizer.py),
cold.py (section 3), report.py (Markdown tables and the targets), command.py (options, one child
process per BLAS setting).
"""
