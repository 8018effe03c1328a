"""Tokenizers in pure Python, token for token the same as Hugging Face's: BERT's WordPiece, and BERT's
relatives' byte-level BPE and SentencePiece Unigram read from a tokenizer.json.

Read in this order (docs/tokenizer.md tells the whole story):

- basic.py: BERT's stages, plainly: normalize (with offsets), split into words, WordPiece.
- unicode_tables.py: where the Rust tokenizer's Unicode tables differ from Python's, as data.
- The stages as sibling kinds, each behind a small protocol, as the Rust `tokenizers` library has them:
  normalizers.py (+ precompiled.py), pre_tokenizers.py, models.py (WordPiece; bpe.py, unigram.py),
  templates.py (the post-processors), decoders.py; added_tokens.py (special tokens cut out whole).
- stages.py: the normalizer, the pre-tokenizer and the model one after another.
- fast.py (+ blocks.py, words.py): BERT's stages made fast (memos, ASCII, long texts a block at a time);
  pipeline_fast.py: GPT-2's and Metaspace pipelines made fast. Tests hold both equal to the stages.
- encoding.py, truncation.py, cuts.py, tokenizer.py: the `Tokenizer` composes the stages: `encode` and
  `encode_batch` (the template, truncation into windows, a long text read only as far as its kept tokens,
  padding) and `decode`.
- tokenizer_json.py, load.py: a tokenizer.json read stage by stage; the factory of a model directory;
  patterns.py: its regular expressions, read in Oniguruma's dialect and matched in bounded time.
"""

from .basic import (
    clean_char,
    is_chinese_char,
    is_control,
    is_nonspacing_mark,
    is_punctuation,
    is_whitespace,
    lowercase,
    normalize,
    normalize_char,
    pre_tokenize,
    wordpiece,
)
from .encoding import Batch, Encoding
from .fast import keeps_combining_mark
from .load import load_vocab
from .patterns import PatternTimeout
from .tokenizer import Tokenizer
from .truncation import truncated_lengths, windows

__all__ = [
    "Batch",
    "Encoding",
    "PatternTimeout",
    "Tokenizer",
    "clean_char",
    "is_chinese_char",
    "is_control",
    "is_nonspacing_mark",
    "is_punctuation",
    "is_whitespace",
    "keeps_combining_mark",
    "load_vocab",
    "lowercase",
    "normalize",
    "normalize_char",
    "pre_tokenize",
    "truncated_lengths",
    "windows",
    "wordpiece",
]
