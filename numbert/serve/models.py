"""The models one server serves, by name: each loaded in the background with its own queue and model thread.

    numbert serve --model all-MiniLM-L6-v2 --model rerank=./ms-marco-MiniLM-L6-v2

A request picks its model by the route prefix `/models/NAME/...` (every route that works on inputs has one),
else by its body's `model` field (OpenAI's /v1/embeddings, Cohere's /v1/rerank), else it goes to the first
model. With one model served, any `model` field is answered by it (as a single-model server always did);
with several, a name not served is a 404 listing the served ones. Each model has its own Batcher, so the
queue never mixes models and one thread runs each model's forwards; the weights are memory-mapped, so
`--workers N` processes share their pages.

A ServedModel is the model's pipeline (numbert.pipeline: tokenizer, encoder, heads, recipe) with the server's
recipe and readouts, and the request-level refusals in the server's words (ApiError): a recipe choice the
model cannot take, a task its heads cannot do.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import json
import logging
from pathlib import Path

import anyio
import numpy as np

from .. import __version__
from ..checkpoint.fingerprint import model_fingerprint
from ..checkpoint.hub import model_name
from ..pipeline import (
    Batcher,
    Bert,
    LexicalWeights,
    MultiVectors,
    Recipe,
    SentenceVectors,
    SequenceLogits,
    SparseVectors,
    activation_of,
    label_scores,
    load,
    own_weight_bytes,
)
from ..runtime.blas import batches_at_once
from .lanes import MOST_OWN_BYTES, LaneProcesses
from .metrics import Metrics
from .protocol import ApiError, ModelNotFound, clipped
from .settings import Settings

log = logging.getLogger("numbert.serve")


def lanes(settings: Settings) -> int:
    """The batches a model's queue may run at once: in numbert's own process serving one model, two under load
    (numbert.runtime.blas.batches_at_once); one where several models share the process, since the lanes' one-BLAS-thread
    limit is the process's and two models' lanes would each set and undo it."""
    return batches_at_once() if not settings.more_models else 1


class ServedModel:
    """One model of the server: its served name, its pipeline, recipe and Batcher once loaded, or why it failed."""

    def answers_to(self, asked: str) -> bool:
        """Whether a request's `model` names this model: its served name or the name numbert gives its directory or
        hub id, either of them or the name asked taken without a hub id's organisation (all-MiniLM-L6-v2 and
        sentence-transformers/all-MiniLM-L6-v2 name the same model), with or without Ollama's default tag ":latest";
        case ignored."""
        asked = asked.lower().removesuffix(":latest")
        return asked in self.names or asked.rsplit("/", 1)[-1] in self.names

    def __init__(self, name: str, path: str):
        self.name, self.path = name, path
        own = {name, model_name(path)}  # the names a request's `model` may give it (answers_to)
        self.names = {n.lower() for n in own | {n.rsplit("/", 1)[-1] for n in own}}
        self.threads = anyio.CapacityLimiter(2)  # tokenizing this model's requests, apart from the other models'
        self.pipeline: Bert | None = None
        self.batcher: Batcher | None = None
        self.load_error: str | None = None
        self.task_readouts: dict[str | None, SentenceVectors] = {}  # jina's tasks other than the server's
        self.multi_readouts: dict[bool, MultiVectors] = {}  # /embed_multi's readouts, queries' and documents'
        self.widths: dict[int, int] = {}  # the width of each multi-vector readout's vectors, by its id
        self.sparse_only = self.multi_only = False

    def open(self, settings: Settings) -> None:
        """Load the model and build the server's recipe (checked before the server answers anything)."""
        pipeline = load(self.path)
        pipeline.require_tokenizer()
        # a SparseEncoder (SPLADE) model answers /embed_sparse only: its recipe just prepares texts
        self.sparse_only = pipeline.is_sparse_encoder and settings.recipe.get("pooling") is None
        # a ColBERT model (PyLate, MultiVectorEncoder) answers /embed_multi, not /embed: it has no sentence vector
        self.multi_only = pipeline.colbert is not None and settings.recipe.get("pooling") is None
        self.choices = dict(settings.recipe) | ({"pooling": "mean"} if self.sparse_only else {})  # None: the model's
        self.recipe = pipeline.recipe(**self.choices)
        self.embedding = pipeline.sentence_vectors(self.recipe)  # the readout every embedding request queues for
        self.token_vectors = pipeline.token_vectors()  # /embed_all's readout
        self.pipeline = pipeline

    async def load(self, settings: Settings, metrics: Metrics) -> None:
        """Load the model in a thread, then start its model thread; a failure is kept (and logged) for /health."""
        try:
            await anyio.to_thread.run_sync(self.open, settings)
        except Exception as e:  # noqa: BLE001 (/health says why; the model's routes answer 503)
            self.pipeline = None
            self.load_error = f"cannot load the model {self.name}: {e}"
            log.error("%s", self.load_error)
            return
        assert self.pipeline is not None
        n = lanes(settings)
        batcher = Batcher(
            self.pipeline.forward_rows,
            settings.max_batch_tokens,
            settings.max_batch_size,
            metrics,
            lanes=n,
            elsewhere=LaneProcesses(self.path, n) if n > 1 and self.lanes_away(settings) else None,
        )
        batcher.start(self.pipeline.warm_up)
        self.batcher = batcher
        log.info(
            "numbert serve: %s ready (%d-dimensional vectors, inputs up to %d tokens)",
            self.name,
            self.recipe.dim,
            self.recipe.max_length,
        )

    def lanes_away(self, settings: Settings) -> bool:
        """Whether its side-by-side batches run in lane processes (serve.lanes): asked for, and the weights mapped
        from the checkpoint's file, shared by every process; a model the process holds in its own memory (a bf16
        checkpoint widened to float32: 2.4 GB for Qwen3-Embedding-0.6B) would be held again by each lane process."""
        assert self.pipeline is not None
        return settings.lane_processes and own_weight_bytes(self.pipeline) <= MOST_OWN_BYTES

    @property
    def loaded(self) -> bool:
        return self.batcher is not None

    def ready(self) -> tuple[Bert, Batcher]:
        """Its pipeline and Batcher, or a 503: still loading (retry), or failed to load (and why)."""
        if self.pipeline is None or self.batcher is None:
            raise ApiError(
                503,
                self.load_error or f"the model {self.name} is loading; retry in a moment",
                code="model_not_ready",
                headers={"Retry-After": "1"},
            )
        return self.pipeline, self.batcher

    def opened(self) -> Bert:
        """Its pipeline, or a 503 as `ready` gives it."""
        if self.pipeline is None:
            self.ready()
        assert self.pipeline is not None
        return self.pipeline

    def stop(self) -> None:
        """Let the model thread finish its queue, then end (blocks)."""
        if self.batcher is not None:
            self.batcher.stop()

    # --- a request's choices and tasks, refused in the server's words --------------------------------

    def named(self, error: Exception) -> str:
        """The pipeline's `error` as a client reads it: the model's local directory (a path on the server) replaced
        by the model's served name."""
        message = str(error)
        directory = None if self.pipeline is None else self.pipeline.directory
        paths = {self.path, str(Path(self.path)), str(Path(self.path).resolve()), str(directory)}
        for path in sorted((p for p in paths if "/" in p), key=len, reverse=True):  # a path, not a word of the text
            message = message.replace(path, f"the model {self.name!r}")
        return message

    def request_recipe(
        self,
        prompt_name: str | None,
        normalize: bool | None,
        dimensions: int | None,
        precision: str | None = None,
        task: str | None = None,
    ) -> Recipe:
        """The server's recipe with a request's choices: the model's prompt `prompt_name` (a 422 if it has
        no such prompt), normalization, dimensions and precision (None keeps the server's), and its task adapters
        `task` (jina-embeddings-v3; a 422 if it has none such). int8 and uint8 are
        scaled by the served recipe's ranges if it has them (at its precision and width), else by the min and
        max of the request's own vectors, as quantize_embeddings scales them without ranges."""
        pipeline = self.opened()
        recipe = self.recipe
        if task is not None:
            try:
                recipe = pipeline.recipe(**{**self.choices, "task": task})
            except ValueError as e:
                raise ApiError(422, f"'task': {e}", param="task") from None
        if prompt_name is not None:
            if pipeline.sentence_config is None:
                raise ApiError(
                    422,
                    "'prompt_name' names one of a sentence-transformers model's prompts; this model has none",
                    param="prompt_name",
                )
            try:
                recipe = pipeline.recipe(**{**self.choices, "prompt": None, "prompt_name": prompt_name, "task": task})
            except ValueError as e:
                raise ApiError(422, f"'prompt_name': {e}", param="prompt_name") from None
        if dimensions is not None and dimensions > recipe.width:
            raise ApiError(
                400, f"'dimensions' is {dimensions}; this model's vectors have {recipe.width}", param="dimensions"
            )
        if recipe.ranges is not None and dimensions not in (None, recipe.ranges.shape[1]):
            raise ApiError(
                400,
                f"'dimensions' is {dimensions}; this server quantizes vectors of {recipe.ranges.shape[1]} dimensions "
                f"by its calibration ranges",
                param="dimensions",
            )
        return recipe.with_output(normalize=normalize, dimensions=dimensions, precision=precision)

    def embedding_for(self, recipe: Recipe) -> SentenceVectors:
        """The embedding readout for a request's recipe: the server's, or (another task's adapters) one made once
        per task, so the Batcher batches a task's rows together and runs them through its adapters."""
        if recipe.task == self.recipe.task:
            return self.embedding
        if recipe.task not in self.task_readouts:
            self.task_readouts[recipe.task] = self.opened().sentence_vectors(
                dataclasses.replace(self.recipe, task=recipe.task)
            )
        return self.task_readouts[recipe.task]

    @functools.cached_property
    def scores(self) -> SequenceLogits:
        """The readout of /rerank, /v1/rerank and /predict: the classifier's logits per row; a 400 naming the
        missing tensors when the model has no sequence classifier (the embedding routes keep working)."""
        pipeline = self.opened()
        try:
            return pipeline.sequence_logits()
        except ValueError as e:
            raise ApiError(
                400, f"this model cannot score inputs: {self.named(e)}", code="model_not_a_classifier"
            ) from None

    @functools.cached_property
    def sparse(self) -> SparseVectors | LexicalWeights:
        """The readout of /embed_sparse: each row's SPLADE vector (BGE-M3: its lexical weights); a 400 naming the
        missing tensors when the model has no masked-LM head (the other routes keep working)."""
        pipeline = self.opened()
        try:
            return pipeline.sparse_vectors(pipeline.max_active_dims)
        except ValueError as e:
            message = f"this model cannot give sparse vectors: {self.named(e)}"
            raise ApiError(400, message, code="model_has_no_mlm_head") from None

    def relevance(self, raw_scores: bool):
        """The function a reranker's logits go through (the model's activation, or none with raw_scores); a
        400 unless the classifier has one label, as CrossEncoder.rank requires."""
        pipeline = self.opened()
        labels = len(self.scores.classifier.out.weight)
        if labels != 1:
            raise ApiError(
                400,
                f"reranking needs a cross-encoder with one label (a relevance score); this model's classifier "
                f"has {labels}: use /predict",
                code="model_not_a_reranker",
            )
        try:
            return activation_of(pipeline, "identity" if raw_scores else None)
        except ValueError as e:
            raise ApiError(400, self.named(e), code="model_not_a_reranker") from None

    def label_scores(self, raw_scores: bool):
        """/predict's scores of the logits: `numbert classify`'s function (from config.json's problem_type, else
        sigmoid for one label and softmax for several), none with raw_scores; a 400 without a classifier."""
        pipeline = self.opened()
        self.scores  # noqa: B018 (a 400 without a sequence classifier)
        return label_scores(pipeline, "none" if raw_scores else None)

    def model_type(self) -> dict:
        """text-embeddings-inference's model_type: {"reranker" | "classifier": {"id2label", "label2id"}} for a
        model with a sequence classifier (a reranker has one label), else {"embedding": {"pooling"}}."""
        pipeline = self.opened()
        try:
            self.scores  # noqa: B018 (the readout, made once: a 400 without a sequence classifier)
        except ApiError:
            return {"embedding": {"pooling": "+".join(self.recipe.pooling)}}
        labels = pipeline.labels
        kind = "reranker" if len(labels) == 1 else "classifier"
        return {kind: {"id2label": dict(enumerate(labels)), "label2id": {n: i for i, n in enumerate(labels)}}}

    def info(self, settings: Settings, threads: int) -> dict:
        """text-embeddings-inference's GET /info for this model (its Info schema); `threads`: those that parse and
        tokenize requests."""
        pipeline = self.opened()
        return {
            "model_id": self.name,
            "model_sha": snapshot_sha(pipeline.directory),
            "model_dtype": "float32",
            "model_type": self.model_type(),
            "max_concurrent_requests": settings.max_concurrent_requests,
            "max_input_length": self.recipe.max_length,
            "max_batch_tokens": settings.max_batch_tokens,
            "max_batch_requests": settings.max_batch_size,
            "max_client_batch_size": settings.max_client_batch_size,
            "auto_truncate": settings.auto_truncate,
            "tokenization_workers": threads,
            "version": __version__,
            "sha": None,
            "docker_label": None,
            "served_model_name": self.name,  # text-embeddings-inference 1.9's --served-model-name
        }

    # --- multi-vector models (/embed_multi) ------------------------------------------------------------------

    def multi_vectors(self, is_query: bool) -> MultiVectors:
        """The readout of /embed_multi (a query's or a document's token vectors, made once); a 400 for a model that
        gives no vector per token (not ColBERT, not BGE-M3)."""
        pipeline = self.opened()
        if is_query not in self.multi_readouts:
            try:
                self.multi_readouts[is_query] = pipeline.multi_vectors(is_query)
            except ValueError as e:
                raise ApiError(400, self.named(e), code="model_not_multi_vector") from None
        return self.multi_readouts[is_query]

    def multi_width(self, readout: MultiVectors) -> int:
        """The width of the vectors a multi-vector readout gives (its projection's output), made once."""
        if id(readout) not in self.widths:
            vectors = np.zeros((1, self.opened().config.hidden_size), np.float32)
            for layer in readout.projection:
                vectors = layer(vectors)
            self.widths[id(readout)] = vectors.shape[1]
        return self.widths[id(readout)]

    # --- Ollama's description of a model (/api/tags, /api/show) -------------------------------------------------

    @functools.cached_property
    def files(self) -> tuple[str, int, str]:
        """(digest, size in bytes, modified_at) of the model's files, as Ollama lists a model: the SHA-256 of its
        fingerprint (every file its vectors depend on, numbert.checkpoint.fingerprint), their total size and the
        newest one's time (RFC 3339). Reads every file once (about a second for bert-base)."""
        pipeline = self.opened()
        fingerprint = model_fingerprint(self.path)
        digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()
        root = Path(self.path) if Path(self.path).is_dir() else pipeline.directory
        paths = [root / name for name in fingerprint] if root is not None else []
        stats = [p.stat() for p in paths if p.is_file()]
        newest = max((st.st_mtime for st in stats), default=0.0)
        modified = datetime.datetime.fromtimestamp(newest, datetime.UTC).isoformat().replace("+00:00", "Z")
        return digest, sum(st.st_size for st in stats), modified

    def ollama_details(self) -> dict:
        """Ollama's "details" of a model: its format, family and size."""
        pipeline = self.opened()
        parameters = pipeline.parameter_count
        size = f"{parameters / 1e9:.1f}B" if parameters >= 1e9 else f"{parameters / 1e6:.1f}M"
        family = pipeline.config.model_type or "bert"
        return {
            "parent_model": "",
            "format": "safetensors",
            "family": family,
            "families": [family],
            "parameter_size": size,
            "quantization_level": "F32",
        }

    def ollama_tag(self) -> dict:
        """This model as GET /api/tags lists it."""
        digest, size, modified = self.files
        name = f"{self.name}:latest"
        return {
            "name": name,
            "model": name,
            "modified_at": modified,
            "size": size,
            "digest": digest,
            "details": self.ollama_details(),
        }

    def ollama_show(self) -> dict:
        """This model as POST /api/show describes it: enough for a client to pick it as an embedding model."""
        pipeline = self.opened()
        c = pipeline.config
        family = self.ollama_details()["family"]
        return {
            "license": "",
            "modelfile": "",
            "parameters": "",
            "template": "",
            "details": self.ollama_details(),
            "model_info": {
                "general.architecture": family,
                "general.parameter_count": pipeline.parameter_count,
                f"{family}.block_count": c.num_hidden_layers,
                f"{family}.context_length": self.recipe.max_length,
                f"{family}.embedding_length": self.recipe.dim,
                f"{family}.attention.head_count": c.num_attention_heads,
            },
            "capabilities": ["embedding"],
            "modified_at": self.files[2],
        }


class Models:
    """The served models by name, the first the default."""

    def __init__(self, settings: Settings):
        self.by_name = {name: ServedModel(name, path) for name, path in settings.models.items()}
        self.default = next(iter(self.by_name.values()))
        self.any_name = settings.answer_any_model_name  # a name no model answers to: the default (--answer-any-...)

    def __iter__(self):
        return iter(self.by_name.values())

    def pick(self, routed: str | None, asked: str | None = None) -> ServedModel:
        """The model a request is for: `routed` (its /models/NAME/ prefix) must be served, and `asked` (its body's
        `model` field), if given, must name that model too (a 400 naming both); `asked` alone: the model that
        answers to it (ServedModel.answers_to), else a 404 in the API's words, unless the operator asked that the
        default answer every name (--answer-any-model-name); neither: the default. An answer's model field is the
        picked model's served name, never the name asked."""
        if routed is not None:
            if routed not in self.by_name:
                served = ", ".join(repr(n) for n in self.by_name)
                raise ApiError(
                    404,
                    f"the route names the model {clipped(routed)!r}, which this server does not serve; "
                    f"it serves {served}",
                    code="model_not_found",
                )
            picked = self.by_name[routed]
            if asked is not None and not picked.answers_to(asked) and not self.any_name:
                raise ApiError(
                    400,
                    f"the route names the model {routed!r} and 'model' names {clipped(asked)!r}: name one model "
                    "(or leave 'model' out)",
                    param="model",
                    code="model_mismatch",
                )
            return picked
        if asked is None:
            return self.default
        named = next((m for m in self.by_name.values() if m.answers_to(asked)), None)
        if named is None and not self.any_name:
            raise ModelNotFound(asked, list(self.by_name))
        return named or self.default

    def known(self, routed: str | None) -> ServedModel | None:
        """The model a request is for before its body is read, when no body can change it: the one its
        /models/NAME/ prefix names (if served), or the only one served; else None."""
        if routed is not None:
            return self.by_name.get(routed)
        return self.default if len(self.by_name) == 1 else None

    @property
    def load_error(self) -> str | None:
        """Why the models that failed to load failed, or None."""
        errors = [m.load_error for m in self if m.load_error is not None]
        return "; ".join(errors) if errors else None


def snapshot_sha(directory: Path | None) -> str | None:
    """The hub commit of a model directory in the Hugging Face cache (.../snapshots/<sha>), else None."""
    return directory.name if directory is not None and directory.parent.name == "snapshots" else None
