"""docs/architecture.md's house, held: the layers are folders and a module imports only from its own layer or the
layers below it (runtime <- core <- io <- pipeline <- engines), even inside a function or under TYPE_CHECKING; no
two modules import each other, however far round; no module uses another module's underscore-prefixed names or
state; the engines (serve/, cli/, engines/) reach the pipeline through its public face only; the Bert class stays a
thin face."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "numbert"
DOORS = ["transformers", "sentence_transformers", "util"]  # root modules for code written for those libraries
LAYERS = {  # the first part of a module's path below numbert/ -> its layer
    "runtime": ["runtime"],  # the process's settings (BLAS threads, row threads, batches side by side)
    "core": ["model"],
    "io": ["tokenizer", "checkpoint"],
    "pipeline": ["pipeline", "__init__"],
    "engines": ["engines", "serve", "cli", "plot", "testing", "__main__", *DOORS],
}
RANK = {top: rank for rank, names in enumerate(LAYERS.values()) for top in names}
ENGINES = ("engines", "serve", "cli", *DOORS)
# what an engine may import from below the engines: the public faces, the io that names files, the runtime's settings
FACES = {"__init__", "pipeline", "checkpoint.hub", "checkpoint.fingerprint", "runtime.blas", "tokenizer"}
ROOT_MODULES_AT_MOST = 6  # modules directly under numbert/ besides __init__ and __main__
SERVE_IMPORTS_AT_MOST = 5  # numbert modules outside serve/ that serve/ imports


def module_name(path: Path) -> str:
    """numbert/serve/app.py -> serve.app; numbert/pipeline/__init__.py -> pipeline; numbert/__init__.py -> __init__."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(path: Path) -> Iterator[tuple[str, list[str], int]]:
    """(numbert module, the names taken from it, line) of every import in the file, at any depth; `from x import y`
    where x.y is a module counts as an import of x.y."""
    mine = module_name(path)
    package = mine.split(".") if path.name == "__init__.py" and mine != "__init__" else mine.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif (node.module or "").split(".")[0] == "numbert":
                target = node.module.removeprefix("numbert").removeprefix(".")  # type: ignore[union-attr]
            else:
                continue
            names = [a.name for a in node.names]
            modules = [n for n in names if (f"{target}.{n}" if target else n) in MODULES]
            for n in modules:
                yield (f"{target}.{n}" if target else n), [], node.lineno
            rest = [n for n in names if n not in modules]
            if rest:
                yield target or "__init__", rest, node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("numbert."):
                    yield a.name.removeprefix("numbert."), [], node.lineno


def layer_of(module: str) -> int:
    return RANK[module.split(".")[0]]


def test_the_root_holds_the_public_face_and_few_modules():
    root = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(root) <= ROOT_MODULES_AT_MOST, root
    assert set(module.split(".")[0] for module in MODULES) <= set(RANK), "a folder without a layer"


def test_modules_import_only_their_layer_and_below():
    wrong = []
    for mine, path in sorted(MODULES.items()):
        for target, _, line in imported(path):
            if layer_of(target) > layer_of(mine):
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({mine}) imports {target}")
    assert not wrong, "\n".join(wrong)


def test_no_import_circles():
    graph = {mine: {t for t, _, _ in imported(path) if t != mine} for mine, path in MODULES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert not circles, f"modules that import each other: {circles}"


def private_attributes(path: Path) -> set[str]:
    """The underscore-prefixed names a module defines: its functions and classes, and self._x it assigns or defines."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_module_uses_another_modules_private_names_or_state():
    own = {mine: private_attributes(path) for mine, path in MODULES.items()}
    theirs = set().union(*own.values())
    wrong = []
    for mine, path in sorted(MODULES.items()):
        for target, names, line in imported(path):
            if target != mine and any(n.startswith("_") and not n.startswith("__") for n in names):
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {names} from {target}")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in theirs - own[mine]
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} reads {ast.unparse(node)}")
    assert not wrong, "\n".join(wrong)


def test_engines_reach_the_pipeline_through_its_face():
    wrong = []
    for mine, path in sorted(MODULES.items()):
        if mine.split(".")[0] not in ENGINES:
            continue
        for target, _, line in imported(path):
            if layer_of(target) < RANK["engines"] and target not in FACES:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({mine}) imports {target}")
    assert not wrong, "\n".join(wrong)


def test_the_server_parses_calls_the_pipeline_and_renders():
    outside = {t for m, p in MODULES.items() if m.startswith("serve") for t, _, _ in imported(p)}
    outside = {t for t in outside if not t.startswith("serve")}
    assert len(outside) <= SERVE_IMPORTS_AT_MOST, sorted(outside)
    text = "\n".join(p.read_text(encoding="utf-8") for m, p in MODULES.items() if m.startswith("serve"))
    for inside in (".encoder", ".tokenizer", ".heads", "planner", "next_batch", "plan_texts", "BOUNDARY"):
        assert inside not in text, f"serve/ reaches into the pipeline: {inside}"


def test_bert_is_a_thin_face():
    tree = ast.parse((PACKAGE / "pipeline" / "bert.py").read_text(encoding="utf-8"))
    bert = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Bert")
    assert bert.end_lineno - bert.lineno + 1 <= 60  # type: ignore[operator]
    assert not [n for n in bert.body if isinstance(n, ast.FunctionDef)], "Bert binds the tasks; the Pipeline runs"


# --- the rooms' sizes (issue #40) ---------------------------------------------------------------------------------

MODULE_LINES_AT_MOST = 650
FUNCTION_LINES_AT_MOST = 80  # from `def` to its last line
CLASS_METHODS_AT_MOST = 25  # functions defined in the class's body
JSON_READS_AT_MOST = 3  # json.load/json.loads calls under the folders that read model directories
JSON_READERS = ("checkpoint", "model", "tokenizer", "pipeline")
KNOWN: dict[str, int] = {}  # offenders allowed while they are being split, each with its size (none left)


def sizes() -> Iterator[tuple[str, int, int]]:
    """(what, its size, the most it may be) of every module, class and function in numbert/."""
    for path in sorted(MODULES.values()):
        name = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        yield f"module {name}", len(text.splitlines()), MODULE_LINES_AT_MOST
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
                yield f"class {name} {node.name}", len(methods), CLASS_METHODS_AT_MOST
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                yield f"function {name} {node.name}", lines, FUNCTION_LINES_AT_MOST


def test_no_module_class_or_function_too_big_to_hold_in_mind():
    """Modules of at most 650 lines, classes of at most 25 methods, functions of at most 80 lines; KNOWN's offenders
    may not grow, and each must still offend (a fixed one leaves the list)."""
    over = {what: size for what, size, most in sizes() if size > most}
    new = [f"{what}: {size}" for what, size in over.items() if what not in KNOWN or size > KNOWN[what]]
    assert not new, "too big (or grown past its KNOWN size):\n" + "\n".join(new)
    fixed = [what for what in KNOWN if what not in over]
    assert not fixed, f"no longer too big: remove from KNOWN {fixed}"


def test_no_two_classes_of_one_name():
    where: dict[str, list[str]] = {}
    for mine, path in sorted(MODULES.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(f"{mine}:{node.lineno}")
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert not twice, f"one name, several classes: {twice}"


def test_json_files_are_read_in_few_places():
    """checkpoint.json_file reads every config, recipe and tokenizer file; the safetensors header is the other."""
    reads = []
    for mine, path in sorted(MODULES.items()):
        if mine.split(".")[0] not in JSON_READERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("load", "loads")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "json"
            ):
                reads.append(f"{mine}:{node.lineno}")
    assert len(reads) <= JSON_READS_AT_MOST, reads


def test_the_architecture_is_one_screen():
    lines = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 60, len(lines)
    assert all(len(line) <= 120 for line in lines), [n + 1 for n, line in enumerate(lines) if len(line) > 120]
