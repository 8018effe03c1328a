"""BERT's WordPiece tokenizer in pure Python, token for token the same as Hugging Face's.

Read in this order (docs/tokenizer.md tells the whole story):

- basic.py: the stages, plainly: normalize (with offsets), split into words, WordPiece.
- unicode_tables.py: where the Rust tokenizer's Unicode tables differ from Python's, as data.
- fast.py: the same stages memoized, with a fast path for ASCII.
- blocks.py: long texts a block at a time, in bounded memory.
- words.py: the word split and the memo's token layout that fast.py and blocks.py share.
- encoding.py, truncation.py, tokenizer.py: `Tokenizer.encode` and `encode_batch`: special
  tokens, the `[CLS] A [SEP] B [SEP]` template, truncation into windows, padding; and `decode`.
- tokenizer_json.py: the same settings read from a Hugging Face tokenizer.json (no vocab.txt).

BERT's relatives (RoBERTa's byte-level BPE, XLM-RoBERTa's SentencePiece Unigram), from a tokenizer.json:

- pipeline.py: the file read stage by stage into `PipelineTokenizer` (the `Tokenizer`'s interface).
- normalizers.py, precompiled.py: NFKC, Lowercase, Strip, Replace, ...; SentencePiece's compiled charsmap.
- pre_tokenizers.py: ByteLevel (GPT-2's split, bytes as characters), Metaspace, splits.
- bpe.py, unigram.py: the models: merges by rank; Viterbi over the pieces' scores.
- templates.py: the post-processors: `<s> A </s></s> B </s>` and the other templates, type ids.
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
from .tokenizer import Tokenizer, load_vocab
from .truncation import truncated_lengths, windows

__all__ = [
    "Batch",
    "Encoding",
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
