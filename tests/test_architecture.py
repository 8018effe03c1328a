"""docs/architecture.md's layers, held: a module imports only from its own layer or the layers below it
(core <- io <- pipeline <- engines), even inside a function; engines use no underscore-prefixed name of
another module; the Bert class stays a thin bundle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "numbert"
LAYERS = {
    "core": ["model"],
    "io": ["tokenizer", "checkpoint"],
    "pipeline": ["pipeline", "__init__"],
    "engines": ["engines", "serve", "cli", "plot", "testing", "__main__"],
}
RANK = {top: rank for rank, names in enumerate(LAYERS.values()) for top in names}
ENGINES = LAYERS["engines"]


def module_name(path: Path) -> str:
    """numbert/serve/app.py -> serve.app; numbert/__init__.py -> __init__."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def imported(path: Path) -> list[tuple[str, list[str], int]]:
    """(numbert module, the names taken from it, line) of every import in the file, at any depth."""
    package = module_name(path).split(".")[:-1] if path.name != "__init__.py" else module_name(path).split(".")
    if module_name(path) == "__init__":
        package = []
    found = []
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
            if not target:  # `from . import x` / `from numbert import x`: each x is a module or a name of __init__
                found += [(n if n in RANK else "__init__", [n], node.lineno) for n in names]
            else:
                found.append((target, names, node.lineno))
        elif isinstance(node, ast.Import):
            found += [
                (a.name.removeprefix("numbert."), [], node.lineno) for a in node.names if a.name.startswith("numbert.")
            ]
    return found


def test_every_module_has_a_layer():
    tops = {module_name(p).split(".")[0] for p in PACKAGE.rglob("*.py")}
    assert tops <= set(RANK), f"modules without a layer in docs/architecture.md: {sorted(tops - set(RANK))}"


def test_modules_import_only_their_layer_and_below():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        mine = module_name(path).split(".")[0]
        for target, _, line in imported(path):
            if RANK[target.split(".")[0]] > RANK[mine]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({mine}) imports {target}")
    assert not wrong, "\n".join(wrong)


def test_engines_use_no_private_name_of_another_module():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        mine = module_name(path)
        if mine.split(".")[0] not in ENGINES:
            continue
        for target, names, line in imported(path):
            if target != mine and any(n.startswith("_") and not n.startswith("__") for n in names):
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {names} from {target}")
        text = path.read_text(encoding="utf-8")
        for private in ("._sentence_recipe", "._dense_layers", "._prompt(", "._max_length", "._text_list"):
            assert private not in text, f"{path} reaches into {private}"
    assert not wrong, "\n".join(wrong)


def test_bert_is_a_thin_bundle():
    tree = ast.parse((PACKAGE / "pipeline" / "bert.py").read_text(encoding="utf-8"))
    bert = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Bert")
    assert bert.end_lineno - bert.lineno + 1 <= 250  # type: ignore[operator]
