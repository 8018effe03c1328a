"""`numbert fill-mask | classify | ner | qa`: the heads a checkpoint carries, from the shell.

    numbert fill-mask "The man worked as a [MASK]."
    numbert classify --model ./sst2-bert --file reviews.txt --json > labels.jsonl
    numbert ner --model ./bert-ner --aggregation first < news.txt
    numbert qa --question "Where do I live?" --context "My name is Wolfgang and I live in Berlin."
    numbert qa --context-file article.txt < questions.txt

Each reads its texts from the arguments, else one per line from --file or stdin, and writes as it
goes: one JSON object per input line with --json, else plain text (a blank line between inputs where
an input gives several lines). A line `A ||| B` is a pair (classify) or a question and its context (qa).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .common import Failure, add_model, load_model, non_negative_int, positive_int
from .encode import PAIR
from .files import input_lines

T = TypeVar("T")


def fill_mask(args: argparse.Namespace) -> None:
    """Each line's top-k guesses for its [MASK] (or each of its [MASK]s)."""
    model = load_model(args.model)
    for number, text in enumerate(input_lines(args), 1):
        found = for_lines([(number, text)], model.fill_mask, text, top_k=args.top_k, max_masks=args.max_masks)
        masks = found if isinstance(found[0], list) else [found]
        if args.json:
            emit({"text": text, "predictions": [[g._asdict() for g in mask] for mask in masks]})
            continue
        for m, mask in enumerate(masks):
            if len(masks) > 1:
                print(f"[MASK] {m + 1} of {len(masks)}")
            for g in mask:
                print(f"{g.token:<16} {g.score:.4f}  {g.sequence}")
        print(flush=True)


def classify(args: argparse.Namespace) -> None:
    """Each line's labels, best first: the best one, or --top-k of them."""
    model = load_model(args.model)
    for chunk in numbered_chunks(input_lines(args), args.batch_size):
        pairs = [PAIR.match(text) for _, text in chunk]
        texts = [m.group(1) if m else text for m, (_, text) in zip(pairs, chunk)]
        seconds = [m.group(2) if m else None for m in pairs] if any(pairs) else None
        results = for_lines(
            chunk, model.classify, texts, seconds, top_k=args.top_k, function=args.function, batch_size=args.batch_size
        )
        for (_, text), labels in zip(chunk, results):
            if args.json:
                emit({"text": text, "labels": [label._asdict() for label in labels]})
            else:
                print("\t".join(f"{label.label}\t{label.score:.4f}" for label in labels), flush=True)


def ner(args: argparse.Namespace) -> None:
    """Each line's entities, one per line (text, label, score, start, end), a blank line after each input."""
    model = load_model(args.model)
    for chunk in numbered_chunks(input_lines(args), args.batch_size):
        texts = [text for _, text in chunk]
        results = for_lines(
            chunk,
            model.ner,
            texts,
            aggregation=args.aggregation,
            stride=args.stride,
            ignore_labels=args.ignore,
            batch_size=args.batch_size,
        )
        for text, entities in zip(texts, results):
            if args.json:
                emit({"text": text, "entities": [e._asdict() for e in entities]})
                continue
            for e in entities:
                print(f"{text[e.start : e.end]}\t{e.entity}\t{e.score:.4f}\t{e.start}\t{e.end}")
            print(flush=True)


def qa(args: argparse.Namespace) -> None:
    """The answer to each question: from --question/--context, or lines 'question ||| context', or the
    lines' questions about one --context / --context-file."""
    context = args.context
    if args.context_file is not None:
        if context is not None:
            raise Failure("give --context or --context-file, not both")
        try:
            with open(args.context_file, encoding="utf-8") as f:
                context = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise Failure(f"cannot read {args.context_file}: {e}") from None
    if args.question is not None and (args.text or args.file is not None):
        raise Failure("give one --question, or questions as arguments or lines, not both")
    questions = iter([args.question]) if args.question is not None else input_lines(args)
    model = load_model(args.model)
    for number, line in enumerate(questions, 1):
        question, text = line, context
        if context is None:
            pair = PAIR.match(line)
            if pair is None:
                raise Failure(f"line {number}: without --context, each line is 'question ||| context'")
            question, text = pair.groups()
        answers = for_lines(
            [(number, line)],
            model.qa,
            question,
            text,
            top_k=args.top_k,
            max_answer_len=args.max_answer_len,
            handle_impossible_answer=args.allow_no_answer,
        )
        answers = [answers] if args.top_k == 1 else answers
        if args.json:
            emit({"question": question, "answers": [a._asdict() for a in answers]})
            continue
        for a in answers:
            print(f"{a.answer}\t{a.score:.4f}\t{a.start}\t{a.end}")
        if args.top_k > 1:
            print()
        sys.stdout.flush()


# --- shared -----------------------------------------------------------------------------------------


def numbered_chunks(lines: Iterator[str], size: int) -> Iterator[list[tuple[int, str]]]:
    """(line number, text) pairs, `size` at a time."""
    chunk: list[tuple[int, str]] = []
    for item in enumerate(lines, 1):
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def for_lines(chunk: list[tuple[int, str]], task: Callable[..., T], *args: Any, **options: Any) -> T:
    """task(*args, **options) on the chunk's lines, a ValueError or TypeError becoming a Failure naming the line(s)."""
    try:
        return task(*args, **options)
    except (ValueError, TypeError) as e:
        first, last = chunk[0][0], chunk[-1][0]
        raise Failure(f"line {first}: {e}" if first == last else f"lines {first}-{last}: {e}") from None


def emit(record: dict) -> None:
    print(json.dumps(record, ensure_ascii=False), flush=True)


# --- the parser -------------------------------------------------------------------------------------


def add_input(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("text", nargs="*", metavar="TEXT", help=f"{what} (default: the lines of --file or stdin)")
    p.add_argument("--file", "-f", metavar="F", help="read one per line from F ('-' for stdin)")
    p.add_argument("--json", action="store_true", help="one JSON object per input line")
    add_model(p)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `numbert fill-mask`, `classify`, `ner` and `qa`."""
    from ..pipeline import AGGREGATIONS, MAX_MASKS, SCORE_FUNCTIONS

    p = commands.add_parser(
        "fill-mask",
        help="BERT's guesses for [MASK] (a checkpoint with the masked-LM head)",
        description="Print the top-k tokens for each [MASK] in each text, with their "
        "probabilities and the filled text, as transformers' fill-mask pipeline.",
    )
    add_input(p, "texts holding [MASK]")
    p.add_argument("--top-k", "-k", type=positive_int, default=5, metavar="N", help="guesses per [MASK] (default: 5)")
    p.add_argument(
        "--max-masks",
        type=positive_int,
        default=MAX_MASKS,
        metavar="N",
        help=f"refuse texts with more [MASK]s (default: {MAX_MASKS})",
    )
    p.set_defaults(run=fill_mask)

    p = commands.add_parser(
        "classify",
        help="label texts (a BertForSequenceClassification checkpoint)",
        description="Print each text's labels and scores, best first; a line 'A ||| B' is a pair.",
    )
    add_input(p, "texts to classify")
    p.add_argument("--top-k", "-k", type=positive_int, default=1, metavar="N", help="labels per text (default: 1)")
    p.add_argument(
        "--function",
        choices=list(SCORE_FUNCTIONS),
        help="scores from logits (default: from config.json's problem_type, as transformers)",
    )
    p.add_argument("--batch-size", type=positive_int, default=32, metavar="N", help="texts per forward pass")
    p.set_defaults(run=classify)

    p = commands.add_parser(
        "ner",
        help="entities in texts (a BertForTokenClassification checkpoint)",
        description="Print each text's entities, one per line (text, label, score, start, "
        "end character), a blank line after each input.",
    )
    add_input(p, "texts to tag")
    p.add_argument(
        "--aggregation",
        choices=AGGREGATIONS,
        default="simple",
        help="how tokens become entities, as transformers' aggregation_strategy (default: simple)",
    )
    p.add_argument(
        "--ignore",
        nargs="*",
        default=["O"],
        metavar="LABEL",
        help="labels to leave out (default: O; --ignore alone keeps every label)",
    )
    p.add_argument(
        "--stride",
        type=non_negative_int,
        metavar="N",
        help="run a text longer than the model reads as windows overlapping by N tokens",
    )
    p.add_argument("--batch-size", type=positive_int, default=32, metavar="N", help="texts per forward pass")
    p.set_defaults(run=ner)

    p = commands.add_parser(
        "qa",
        help="answer questions from a context (a BertForQuestionAnswering checkpoint)",
        description="Print the span of the context that answers each question, with its score "
        "and character offsets, as transformers 4's question-answering pipeline.",
    )
    add_input(p, "questions, or lines 'question ||| context' without --context")
    p.add_argument("--question", "-q", metavar="Q", help="one question")
    p.add_argument("--context", "-c", metavar="C", help="the text to answer from")
    p.add_argument("--context-file", metavar="F", help="read the context from F")
    p.add_argument("--top-k", "-k", type=positive_int, default=1, metavar="N", help="answers per question")
    p.add_argument("--max-answer-len", type=positive_int, default=15, metavar="N", help="tokens (default: 15)")
    p.add_argument("--allow-no-answer", action="store_true", help="the empty answer competes, scored by [CLS]")
    p.set_defaults(run=qa)
