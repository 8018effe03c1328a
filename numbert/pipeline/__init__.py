"""The pipeline layer: text -> rows of token ids -> planned batches -> forwards -> answers.

    pipeline.py    Pipeline: the tokenizer, encoder, heads and sentence config of a model, and the path of text
                   through them (text-embeddings-inference's Infer), composed of three parts: loader.py (a
                   directory -> its parts), inputs.py (text -> rows), runner.py (rows -> an Output); bert.py:
                   Bert, the Pipeline with every task as a method, what numbert.load gives
    recipe.py      Recipe: how a text becomes one sentence vector (pooling, layers, Dense, normalize, ...)
    planner.py     rows, and the two batch planners: a corpus by length, a live queue by token budget
    batcher.py     Batcher: a live queue of requests' rows and the one thread that runs their forwards (on its
                   lanes; short rows take turns at a long forward's points)
    readouts.py    what one forward's rows become for each task
    embedding.py, sparse.py, reranking.py, tasks.py, vocabulary.py, late_interaction.py, m3.py: the tasks, each a
                   function of the Pipeline
    quantization.py, search.py: vectors for an index, and search over them

This module is the layer's public face: the engines above it (numbert.cli, numbert.serve, numbert.engines) import
what they use from here, never from the modules behind it.
"""

from ..model.pooling import COMBINES, POOLINGS, STRATEGIES
from ..tokenizer.patterns import PatternTimeout
from ..tokenizer.patterns import deadline as pattern_deadline
from .batcher import Batcher, Readout
from .bert import Bert, load
from .embedding import WorkerPool
from .inputs import InputTooLong, InvalidTokenId, NotAPair, TooManyTokens, multi_vector_kind
from .late_interaction import maxsim, similarity_of
from .m3 import MODES as M3_MODES
from .m3 import M3Embeddings
from .pipeline import Pipeline, own_weight_bytes
from .planner import Row, positive
from .quantization import CALIBRATED, DTYPES, PRECISIONS, quantize, width
from .readouts import (
    LexicalWeights,
    M3Vectors,
    MaskedLMLogits,
    MultiVectors,
    SentenceVectors,
    SequenceLogits,
    SparseVector,
    SparseVectors,
    TokenVectors,
    prune,
)
from .recipe import Recipe
from .reranking import activation_of, ranking
from .search import semantic_search
from .tasks import AGGREGATIONS, MAX_MASKS, SCORE_FUNCTIONS, label_scores

__all__ = [
    "AGGREGATIONS",
    "CALIBRATED",
    "COMBINES",
    "DTYPES",
    "M3_MODES",
    "MAX_MASKS",
    "POOLINGS",
    "PRECISIONS",
    "SCORE_FUNCTIONS",
    "STRATEGIES",
    "Batcher",
    "Bert",
    "InputTooLong",
    "InvalidTokenId",
    "LexicalWeights",
    "M3Embeddings",
    "M3Vectors",
    "MaskedLMLogits",
    "MultiVectors",
    "NotAPair",
    "PatternTimeout",
    "Pipeline",
    "Readout",
    "Recipe",
    "Row",
    "SentenceVectors",
    "SequenceLogits",
    "SparseVector",
    "SparseVectors",
    "TokenVectors",
    "TooManyTokens",
    "WorkerPool",
    "activation_of",
    "label_scores",
    "load",
    "maxsim",
    "multi_vector_kind",
    "own_weight_bytes",
    "pattern_deadline",
    "positive",
    "prune",
    "quantize",
    "ranking",
    "semantic_search",
    "similarity_of",
    "width",
]
