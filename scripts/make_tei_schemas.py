#!/usr/bin/env python
"""tests/fixtures/tei_openapi_schemas.json from text-embeddings-inference's own OpenAPI document.

    python scripts/make_tei_schemas.py                                   # ../shared/reference/tei-1.9.3-openapi.json
    python scripts/make_tei_schemas.py path/to/openapi.json

TEI's document is OpenAPI 3.0 (`nullable`, `#/components/schemas/...`); the fixture is JSON Schema 2020-12, which
jsonschema validates answers against (tests/test_serve_ops.py): a nullable type becomes a type list (a nullable
`$ref` or `allOf` a `anyOf` with null), references point into `$defs`, and what only documents (description,
example, default, format) is left out. Each route keeps its request and 200-answer schema; the error schemas are left
out (numbert answers errors in OpenAI's shape).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT.parent / "shared" / "reference" / "tei-1.9.3-openapi.json"
FIXTURE = ROOT / "tests" / "fixtures" / "tei_openapi_schemas.json"
DOCUMENTING = {"description", "example", "examples", "default", "format"}
ERRORS = {"ErrorResponse", "ErrorType", "OpenAICompatErrorResponse"}


def json_schema(node):
    """An OpenAPI 3.0 schema (or any part of one) as JSON Schema 2020-12."""
    if isinstance(node, list):
        return [json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: json_schema(v) for k, v in node.items() if k not in DOCUMENTING and k != "nullable"}
    if "$ref" in out:
        out["$ref"] = out["$ref"].replace("#/components/schemas/", "#/$defs/")
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        else:  # a $ref or allOf: it, or null
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def schema_name(schema: dict | None) -> str | None:
    return None if schema is None or "$ref" not in schema else schema["$ref"].rsplit("/", 1)[-1]


def routes(document: dict) -> dict:
    """Each route: its method and the names of its request and 200-answer schemas (None: no JSON body)."""
    found = {}
    for path, operations in sorted(document["paths"].items()):
        for method, operation in operations.items():
            request = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            answer = operation.get("responses", {}).get("200", {}).get("content", {}).get("application/json", {})
            found[path] = {
                "method": method,
                "request": schema_name(request),
                "response": schema_name(answer.get("schema")),
            }
    return found


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else DOCUMENT
    document = json.loads(source.read_text(encoding="utf-8"))
    schemas = document["components"]["schemas"]
    fixture = {
        "source": f"text-embeddings-inference's docs/openapi.json, info.version {document['info']['version']} "
        f"(Apache-2.0), converted by scripts/make_tei_schemas.py to JSON Schema 2020-12",
        "paths": routes(document),
        "$defs": {name: json_schema(schema) for name, schema in sorted(schemas.items()) if name not in ERRORS},
    }
    FIXTURE.write_text(json.dumps(fixture, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE.relative_to(ROOT)}: {len(fixture['paths'])} routes, {len(fixture['$defs'])} schemas")


if __name__ == "__main__":
    main()
