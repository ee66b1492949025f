"""docs/openapi.yaml describes exactly the routes and methods the app serves."""

from __future__ import annotations

import re
from pathlib import Path

import falcon
import falcon.testing
import pytest
import yaml

from zaqar_lite.api.app import build_services, create_app, routes
from zaqar_lite.storage import open_storage

OPENAPI = Path(__file__).resolve().parent.parent / "docs" / "openapi.yaml"
OPERATIONS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
TEMPLATE_FIELD = re.compile(r"{([^}]+)}")


@pytest.fixture(scope="module")
def document() -> dict:
    with OPENAPI.open() as handle:
        return yaml.safe_load(handle)


@pytest.fixture
def route_table(settings) -> list[tuple[str, object]]:
    return routes(build_services(settings, open_storage(settings.storage_uri)))


def served_operations(route_table: list[tuple[str, object]]) -> set[tuple[str, str]]:
    """Return (URI template, HTTP method) for every on_<method> responder of every route."""
    served = set()
    for template, resource in route_table:
        for method in falcon.COMBINED_METHODS:
            if callable(getattr(resource, f"on_{method.lower()}", None)):
                served.add((template, method))
    return served


def documented_operations(document: dict) -> set[tuple[str, str]]:
    """Return (path, HTTP method) for every operation of the OpenAPI document."""
    return {(path, method.upper())
            for path, item in document["paths"].items()
            for method in item if method in OPERATIONS}


def resolve(document: dict, node: dict) -> dict:
    """Follow a local ``$ref`` (``#/components/...``) to the object it names."""
    while "$ref" in node:
        target: object = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]  # type: ignore[index]
        node = target  # type: ignore[assignment]
    return node


def sample_path(template: str) -> str:
    """Fill a URI template's fields with valid sample values."""
    return TEMPLATE_FIELD.sub(lambda m: f"sample-{m.group(1).replace('_', '-')}", template)


def test_every_served_route_and_method_is_documented(route_table, document):
    missing = served_operations(route_table) - documented_operations(document)
    assert missing == set(), f"served but not in docs/openapi.yaml: {sorted(missing)}"


def test_every_documented_route_and_method_is_served(route_table, document):
    extra = documented_operations(document) - served_operations(route_table)
    assert extra == set(), f"in docs/openapi.yaml but not served: {sorted(extra)}"


def test_the_app_answers_every_documented_path_with_the_documented_methods(client, document):
    for path, item in document["paths"].items():
        response = client.simulate_options(sample_path(path))
        assert response.status_code == 200, path
        allowed = {m.strip() for m in response.headers["allow"].split(",")}
        assert allowed == {m.upper() for m in item if m in OPERATIONS}, path


def test_create_app_serves_the_route_table(settings):
    app = create_app(settings)
    client = falcon.testing.TestClient(app)
    assert client.simulate_get("/").status_code == 300


def test_path_parameters_match_the_template_fields(document):
    for path, item in document["paths"].items():
        fields = set(TEMPLATE_FIELD.findall(path))
        shared = [resolve(document, p) for p in item.get("parameters", [])]
        for method in (m for m in item if m in OPERATIONS):
            parameters = shared + [resolve(document, p) for p in item[method].get("parameters", [])]
            in_path = {p["name"] for p in parameters if p["in"] == "path"}
            assert in_path == fields, f"{method.upper()} {path}"
            assert all(p.get("required") for p in parameters if p["in"] == "path"), path


def test_every_operation_documents_its_responses(document):
    for path, item in document["paths"].items():
        for method in (m for m in item if m in OPERATIONS):
            responses = item[method].get("responses")
            assert responses, f"{method.upper()} {path} has no responses"
            for status, response in responses.items():
                assert resolve(document, response).get("description"), f"{method.upper()} {path} {status}"


def test_error_responses_use_the_error_body(document):
    error = document["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"title", "description"}
    for name, response in document["components"]["responses"].items():
        schema = response["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/Error"}, name


def test_a_real_error_body_has_exactly_the_documented_keys(client, document):
    body = client.simulate_get("/v2/queues", params={"limit": "0"}).json
    assert set(body) == set(document["components"]["schemas"]["Error"]["properties"])


def test_the_document_is_a_valid_openapi_3_document(document):
    try:
        from openapi_spec_validator import validate
    except ImportError:
        validate = None
    if validate is not None:
        validate(document)
        return
    assert str(document["openapi"]).startswith("3.0")
    assert document["info"]["title"] and document["info"]["version"]
    assert isinstance(document["paths"], dict) and document["paths"]
    for path in document["paths"]:
        assert path.startswith("/"), path
