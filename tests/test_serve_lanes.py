"""numbert.serve.lanes: a served model's side-by-side batches in lane processes of their own. They answer the bits
a lane of the server's process answers (one BLAS thread), a readout too heavy to send stays in the server, a lane
process that dies fails its batch alone and is replaced, and closing ends them all. Two processes of MiniLM, started
once for the module (about a second)."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

import numbert
from numbert.pipeline import Row
from numbert.serve import lanes as lanes_module
from numbert.serve.lanes import LaneDied, LaneProcesses


def ready(lanes: LaneProcesses, n: int, timeout: float = 60) -> None:
    """Wait until `n` lane processes are idle and ready."""
    deadline = time.monotonic() + timeout
    while lanes.idle.qsize() < n:
        assert time.monotonic() < deadline, "the lane processes did not load the model"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def lanes(minilm_dir):
    processes = LaneProcesses(str(minilm_dir), 2)
    processes.open()
    ready(processes, 2)
    yield processes
    processes.close()


def rows_of(model, texts: list[str]) -> list[Row]:
    return [Row(np.asarray(model.tokenizer.encode(t).ids, np.int32)) for t in texts]


def test_a_lane_process_answers_the_bits_of_a_lane_here(lanes, minilm):
    rows = rows_of(minilm, ["a lane process answers", "the same bits as a lane of the server", "ok"])
    embedding = minilm.sentence_vectors(minilm.recipe())
    with numbert.threads(1):  # a side-by-side lane's BLAS
        want = embedding(minilm.forward_rows(rows, one_token=embedding.one_token, last_layers=embedding.last_layers))
        tokens = minilm.token_vectors()
        want_tokens = tokens(minilm.forward_rows(rows, last_layers=tokens.last_layers))
    for _ in range(2):  # the readout's pickle is sent once, then named
        got = lanes.answers(rows, embedding)
        assert got is not None and all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    got_tokens = lanes.answers(rows, tokens)
    assert got_tokens is not None and all(np.array_equal(g, w) for g, w in zip(got_tokens, want_tokens, strict=True))


def test_a_readout_too_heavy_to_send_runs_in_the_server(lanes, minilm, monkeypatch):
    monkeypatch.setattr(lanes_module, "MOST_PICKLED", 10)
    readout = minilm.sentence_vectors(minilm.recipe(normalize=False))  # a readout the processes have not seen
    assert lanes.answers(rows_of(minilm, ["heavy"]), readout) is None


def test_a_lane_process_that_dies_fails_its_batch_and_is_replaced(lanes, minilm, caplog):
    rows = rows_of(minilm, ["a lane process killed"])
    embedding = minilm.sentence_vectors(minilm.recipe())
    victims = list(lanes.processes)
    for process in victims:
        process.process.kill()
        process.process.wait()
    with pytest.raises(LaneDied, match=r"died \(killed by SIGKILL\)"):
        lanes.answers(rows, embedding)
    assert "a new lane process starts" in caplog.text
    for _ in range(2):  # the other killed one, idle, fails its batch too (or a new one answers)
        try:
            lanes.answers(rows, embedding)
        except LaneDied:
            break
    ready(lanes, 2)  # both replaced
    assert not set(victims) & set(lanes.processes)
    assert lanes.answers(rows, embedding) is not None


def test_no_process_ready_leaves_the_batch_here_and_close_ends_them(minilm_dir, minilm):
    processes = LaneProcesses(str(minilm_dir), 1)
    rows = rows_of(minilm, ["not yet"])
    assert processes.answers(rows, minilm.sentence_vectors(minilm.recipe())) is None  # not opened: none ready
    processes.open()
    ready(processes, 1)
    started = list(processes.processes)
    processes.close()
    assert all(p.process.poll() is not None for p in started) and not processes.processes


def test_the_queue_sends_side_by_side_batches_elsewhere_and_runs_a_lone_one_itself(minilm):
    """numbert.pipeline.batcher with an Elsewhere: the batches that start while another runs or waits go there (a
    None answer runs them on the lane); a batch alone runs on the lane with the process's threads."""
    from numbert.pipeline import Batcher
    from numbert.serve.metrics import Metrics

    rows = rows_of(minilm, ["one", "two words", "three words here"])
    first, second = minilm.sentence_vectors(minilm.recipe()), minilm.token_vectors()  # never in one batch
    sent: list = []

    class Away:
        def open(self) -> None:
            pass

        def answers(self, rows, readout):
            sent.append((len(rows), readout))
            return None if readout is second else [np.zeros(1)] * len(rows)  # the second runs on its lane

        def close(self) -> None:
            sent.append("closed")

    async def serve():
        batcher = Batcher(minilm.forward_rows, 16384, 32, Metrics(), lanes=2, elsewhere=Away())
        futures = [batcher.submit(rows, first), batcher.submit(rows[:1], second)]  # queued before the thread starts
        batcher.start(lambda: None)
        got = await asyncio.gather(*futures)
        lone = await batcher.submit(rows[:2], first)  # nothing else in hand: alone, on its lane
        await asyncio.to_thread(batcher.stop)
        return got, lone

    (away, here), lone = asyncio.run(serve())
    assert sent == [(3, first), (1, second), "closed"] or sent == [(1, second), (3, first), "closed"]
    assert [a.tolist() for a in away] == [[0.0]] * 3
    assert here[0].shape == (len(rows[0].ids), 384)
    assert lone[0].shape == (384,)


def save_as_bf16(source, directory):
    """A copy of the model directory `source` whose safetensors weights are bf16 (each float32's upper 16 bits), as
    Qwen3-Embedding ships: numbert widens them to float32 in the process's own memory."""
    import json
    import shutil

    shutil.copytree(source, directory)
    path = directory / "model.safetensors"
    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header, body = json.loads(data[8 : 8 + size]), data[8 + size :]
    out_header, chunks, offset = {}, [], 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        halves = (np.frombuffer(body[start:end], "<f4").view("<u4") >> 16).astype("<u2").tobytes()
        out_header[name] = {"dtype": "BF16", "shape": entry["shape"], "data_offsets": [offset, offset + len(halves)]}
        chunks.append(halves)
        offset += len(halves)
    encoded = json.dumps(out_header).encode()
    encoded += b" " * (-len(encoded) % 8)
    path.write_bytes(len(encoded).to_bytes(8, "little") + encoded + b"".join(chunks))


def test_a_model_in_the_process_s_own_memory_keeps_its_batches_at_home(monkeypatch, tmp_path):
    """Lane processes map a safetensors checkpoint's float32 pages, shared; a model the process holds in its own
    memory (a bf16 checkpoint widened) would be held again by each: over MOST_OWN_BYTES, none starts."""
    from numbert.pipeline import own_weight_bytes
    from numbert.serve.models import ServedModel
    from numbert.serve.settings import Settings
    from numbert.testing import fixture

    monkeypatch.setattr("numbert.serve.models.MOST_OWN_BYTES", 0)
    save_as_bf16(fixture("cross_encoder"), tmp_path / "bf16")
    settings = Settings(model=str(fixture("cross_encoder")))
    mapped, widened = ServedModel("m", str(fixture("cross_encoder"))), ServedModel("w", str(tmp_path / "bf16"))
    for served in (mapped, widened):
        served.open(settings)
    assert own_weight_bytes(mapped.opened()) == 0  # every tensor a view of the file's map
    weights = widened.opened().encoder.weights
    assert own_weight_bytes(widened.opened()) == sum(w.nbytes for w in weights.values()) > 0
    assert mapped.lanes_away(settings) and not widened.lanes_away(settings)
    assert not mapped.lanes_away(Settings(model=str(fixture("cross_encoder")), lane_processes=False))
