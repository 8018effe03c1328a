"""The API describes itself: /openapi.json is a valid OpenAPI 3.1 document of every route the server answers, every
answer of the requests it gives as examples validates against it, and /docs (Swagger UI, its files from the
swagger-ui-py package) renders in Debian's headless chromium and sends an /embed that returns a vector."""

from __future__ import annotations

import json
import os

import httpx
import jsonschema
import pytest
from helpers import ServerProcess
from test_late_interaction import PYLATE_DIR
from test_serve_ops import TINY, write_cross_encoder

from numbert.serve import Settings
from numbert.serve.app import create_app
from numbert.testing import write_random_bert

PREFIXES = {"/rerank": "/models/ranker", "/v1/rerank": "/models/ranker", "/predict": "/models/ranker"}
PREFIXES |= {"/embed_multi": "/models/colbert"}
SCREENSHOT = os.environ.get("NUMBERT_DOCS_SCREENSHOT")  # a path: the rendered page, for a person to look at


@pytest.fixture(scope="module")
def server(tmp_path_factory, vocab_path):
    root = tmp_path_factory.mktemp("openapi")
    embedder = write_random_bert(root / "tiny", vocab_path, TINY, seed=1)
    ranker = write_cross_encoder(root / "ranker", vocab_path)
    s = ServerProcess(embedder, "--model", f"ranker={ranker}", "--model", f"colbert={PYLATE_DIR}")
    yield s
    assert s.stop() == 0, "".join(s.lines)


@pytest.fixture(scope="module")
def document(server) -> dict:
    return httpx.get(server.url + "/openapi.json").json()


def validate(value, schema: dict, document: dict) -> None:
    """`value` valid against `schema` (refs into the document's components), else a jsonschema.ValidationError."""
    jsonschema.Draft202012Validator(schema | {"components": document["components"]}).validate(value)


def test_the_document_is_openapi_3_1_and_describes_every_route(document):
    from openapi_spec_validator import validate as validate_spec

    validate_spec(document)
    assert document["openapi"] == "3.1.0"
    routes = {r.path.replace("{model:path}", "{model}") for r in create_app(Settings(model="unused")).routes}
    assert set(document["paths"]) == routes
    embed = document["paths"]["/embed"]["post"]
    assert embed["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/EmbedRequest"
    }
    assert {"200", "413", "422", "429"} <= set(embed["responses"])
    assert document["paths"]["/models/{model}/embed_multi"]["post"]["parameters"][0]["name"] == "model"
    assert "security" not in document  # no keys: nothing to send


def test_with_keys_the_document_names_bearer_auth_and_the_open_paths():
    app = create_app(Settings(model="unused", api_keys=["sk-test-key"]))
    doc = app.state.server.described
    assert doc["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
    assert doc["security"] == [{"bearer": []}]
    assert "401" in doc["paths"]["/embed"]["post"]["responses"]
    for path in ("/health", "/metrics", "/docs", "/openapi.json"):
        assert doc["paths"][path]["get"]["security"] == [], path
    from numbert.serve.app import open_paths_of

    assert {"/docs", "/openapi.json", "/docs/swagger-ui-bundle.js"} <= set(open_paths_of(Settings(model="m")))


def test_every_answer_validates_against_the_document(server, document):
    """Each route's example request (its schema's example) answered 200, the answer valid against the document;
    and errors in the shapes it names (OpenAI's, Ollama's on /api/*)."""
    checked = 0
    for path, item in document["paths"].items():
        if path.startswith("/models/") or path.startswith("/docs") or path in ("/metrics", "/openapi.json"):
            continue
        ((method, op),) = item.items()
        body = None
        if "requestBody" in op:
            name = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
            body = document["components"]["schemas"][name]["example"]
            if "model" in body:
                body = body | {"model": server.model_name}
        r = httpx.request(method, server.url + PREFIXES.get(path, "") + path, json=body, timeout=60)
        assert r.status_code == 200, (path, r.text[:300])
        validate(r.json(), op["responses"]["200"]["content"]["application/json"]["schema"], document)
        checked += 1
    assert checked >= 18
    for path, error in (("/embed", "Error"), ("/api/embed", "OllamaError")):
        r = httpx.post(server.url + path, json={"inputs": 3, "input": 3, "model": server.model_name})
        assert r.status_code == 422
        validate(r.json(), {"$ref": f"#/components/schemas/{error}"}, document)


def test_swagger_ui_renders_in_chromium_and_sends_an_embed(server):
    """Debian's chromium, headless, loads /docs: the page lists the routes, and POST /embed sent from it (its
    example body) answers 200 with a vector."""
    webdriver = pytest.importorskip("selenium.webdriver")
    missing = [path for path in ("/usr/bin/chromium", "/usr/bin/chromedriver") if not os.path.exists(path)]
    if missing:  # a fresh machine: .ci/run installs them (and under CI a skip is a failure, so CI never goes without)
        pytest.skip(
            f"Debian's chromium and chromium-driver are not installed ({', '.join(missing)} missing): "
            "apt-get install chromium chromium-driver, as .ci/run does"
        )
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    browser = webdriver.Chrome(options=options, service=webdriver.ChromeService("/usr/bin/chromedriver"))
    try:
        browser.get(server.url + "/docs")
        wait = WebDriverWait(browser, 60)
        wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, ".opblock-summary-path")))
        paths = {e.text.replace("\u200b", "") for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
        assert {"/embed", "/v1/embeddings", "/embed_multi", "/api/embed", "/rerank"} <= paths
        block = browser.find_element(By.ID, "operations-numbert-_embed")
        block.find_element(By.CSS_SELECTOR, ".opblock-summary").click()
        wait.until(lambda _: block.find_elements(By.CSS_SELECTOR, "button.execute"))
        block.find_element(By.CSS_SELECTOR, "button.execute").click()
        answer = wait.until(lambda _: block.find_elements(By.CSS_SELECTOR, ".live-responses-table .microlight"))
        status = block.find_element(By.CSS_SELECTOR, ".live-responses-table tbody .response-col_status").text
        vectors = json.loads(answer[0].text)
        if SCREENSHOT:
            browser.set_window_size(1200, 1600)
            browser.save_screenshot(SCREENSHOT)
    finally:
        browser.quit()
    assert status.startswith("200")
    assert len(vectors) == 1 and len(vectors[0]) == TINY.hidden_size
