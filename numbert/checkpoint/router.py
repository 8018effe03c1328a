"""A sentence-transformers Router: different modules for queries and for documents, in one directory.

sentence-transformers 5 saves a Router as one module of modules.json, whose `router_config.json` lists each route's
modules by folder name (each module saved in its own folder below the Router's):

    {"types": {"query_0_SparseStaticEmbedding": "...SparseStaticEmbedding",
               "document_0_MLMTransformer": "...MLMTransformer", "document_1_SpladePooling": "...SpladePooling"},
     "structure": {"query": ["query_0_SparseStaticEmbedding"],
                   "document": ["document_0_MLMTransformer", "document_1_SpladePooling"]},
     "parameters": {"default_route": "document", "allow_empty_key": true, "route_mappings": {}}}

`encode_query` takes the "query" route, `encode_document` the "document" route, `encode` the default route.
numbert runs one encoder per model, so it reads a Router whose transformer sits on one route (the encoder route:
its folder holds the weights, config and tokenizer) and whose other routes are static: a SparseStaticEmbedding (the
inference-free sparse models, such as opensearch's: a query is weighed by a fixed weight per vocabulary entry, one
per token it holds, with no forward at all). A Router with a transformer on two routes is refused, naming the
folders to load as models of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .json_file import read_object

ENCODERS = ("Transformer", "MLMTransformer")  # the modules that hold the encoder
STATIC = "SparseStaticEmbedding"  # a route that weighs tokens by a fixed table
ROUTER_FILE = "router_config.json"


@dataclass(frozen=True)
class Router:
    """A Router module's routes, each a tuple of (folder, module kind); folders are relative to the model directory."""

    directory: Path  # the model directory (the one whose modules.json lists the Router)
    routes: dict[str, tuple[tuple[str, str], ...]]
    default_route: str
    encoder_route: str  # the route whose modules include the transformer
    after: tuple[tuple[str, str], ...] = ()  # modules.json's modules after the Router, on every route

    @property
    def encoder_path(self) -> str:
        """The encoder route's transformer folder: the model's weights, config and tokenizer."""
        return next(path for path, kind in self.routes[self.encoder_route] if kind in ENCODERS)

    def modules(self, route: str | None = None) -> list[tuple[str, str]]:
        """The modules a text on `route` (default: the encoder route) goes through, the Router's own followed by
        those after it."""
        return [*self.routes[route or self.encoder_route], *self.after]

    def route(self, task: str | None) -> str:
        """The route of a task ("query", "document"; None: the default route), as sentence-transformers picks it;
        a ValueError naming the routes for one the Router lacks."""
        if task is None:
            return self.default_route
        if task not in self.routes:
            raise ValueError(f"{self.directory / ROUTER_FILE}: no route {task!r}; its routes: {', '.join(self.routes)}")
        return task


def read_router(directory: Path, modules: list[tuple[str, str]]) -> Router | None:
    """The Router that `modules` (modules.json's (path, kind) list of `directory`) starts with, or None."""
    if not modules or modules[0][1] != "Router":
        return None
    path, _ = modules[0]
    file = directory / path / ROUTER_FILE
    config = read_object(file)
    types, structure = config.get("types"), config.get("structure")
    if not isinstance(types, dict) or not isinstance(structure, dict) or not structure:
        raise ValueError(f"{file}: a Router's config needs 'types' and 'structure' objects")
    routes = {}
    for route, keys in structure.items():
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k in types for k in keys):
            raise ValueError(f"{file}: route {route!r} must list folders named in 'types'")
        for key in keys:
            inside = directory.resolve() / path / key
            if not inside.resolve().is_relative_to(directory.resolve()) or Path(key).is_absolute():
                raise ValueError(f"{file}: folder {key[:100]!r} leaves the model directory")
        routes[route] = tuple((str(Path(path) / key), str(types[key]).rsplit(".", 1)[-1]) for key in keys)
    parameters = config.get("parameters")
    parameters = parameters if isinstance(parameters, dict) else {}
    default_route = parameters.get("default_route") or next(iter(routes))
    if default_route not in routes:
        raise ValueError(f"{file}: default_route {default_route!r} is not one of its routes ({', '.join(routes)})")
    return Router(directory, routes, default_route, encoder_route(file, routes), tuple(modules[1:]))


def encoder_route(file: Path, routes: dict[str, tuple[tuple[str, str], ...]]) -> str:
    """The one route with a transformer; every other route must be static (a SparseStaticEmbedding alone)."""
    encoders = [route for route, modules in routes.items() if any(kind in ENCODERS for _, kind in modules)]
    if len(encoders) != 1:
        folders = ", ".join(path for route in encoders for path, kind in routes[route] if kind in ENCODERS)
        raise ValueError(
            f"{file}: numbert runs a Router with a transformer on one route, this one has "
            + (f"one on each of {', '.join(encoders)}: load each folder ({folders}) as a model of its own" if encoders
               else "none")
        )  # fmt: skip
    for route, modules in routes.items():
        if route != encoders[0] and [kind for _, kind in modules] != [STATIC]:
            kinds = ", ".join(kind for _, kind in modules)
            raise ValueError(f"{file}: route {route!r} runs {kinds}; numbert runs a {STATIC} beside the encoder route")
    return encoders[0]
