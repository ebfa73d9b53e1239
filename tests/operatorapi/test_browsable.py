"""The operator API in a browser: DRF's browsable API for a user logged in to the admin
(``Accept: text/html``); JSON for everyone else, and JSON by default — byte for byte the same
answers and the same OpenAPI document as without it."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import AssetEventFactory, DagFactory, DagRunFactory
from tests.operatorapi.conftest import OPERATOR_PERMISSIONS, make_user, token_client

pytestmark = pytest.mark.django_db

API = "/api/v1"
HTML = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"  # a browser's
PAGES = ["/", "/assets", "/asset-events", "/dags", "/dags/orders", "/dag-runs", "/queue"]


@pytest.fixture
def rows() -> None:
    dag = DagFactory(dag_id="orders")
    DagRunFactory(dag=dag)
    AssetEventFactory()


@pytest.fixture
def browser() -> Client:
    client = Client()
    client.force_login(make_user("operator", *OPERATOR_PERMISSIONS))
    return client


@pytest.mark.parametrize("path", PAGES)
def test_a_logged_in_browser_gets_the_browsable_api(browser, rows, path):
    response = browser.get(f"{API}{path}", HTTP_ACCEPT=HTML)

    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8"
    page = response.content.decode()
    assert "Django REST framework" in page
    assert "operator" in page  # the logged-in user, in the navigation bar


def test_the_browsable_api_shows_errors_too(browser):
    response = browser.get(f"{API}/dags/nope", HTTP_ACCEPT=HTML)

    assert response.status_code == 404
    assert response["Content-Type"] == "text/html; charset=utf-8"


@pytest.mark.parametrize("path", PAGES)
def test_json_unless_a_browser_asks_for_html(browser, rows, path):
    token = token_client(make_user("script", *OPERATOR_PERMISSIONS))

    as_script = token.get(f"{API}{path}", HTTP_ACCEPT=HTML)  # a token is no browser session
    as_browser_json = browser.get(f"{API}{path}")  # no Accept: JSON
    as_browser_any = browser.get(f"{API}{path}", HTTP_ACCEPT="*/*")

    for response in (as_script, as_browser_json, as_browser_any):
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
    assert as_browser_json.content == as_script.content == as_browser_any.content


def test_anonymous_html_is_the_json_401():
    response = Client().get(f"{API}/dags", HTTP_ACCEPT=HTML)

    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"


def test_the_schema_is_the_same_for_a_logged_in_browser(browser):
    anonymous = Client().get(f"{API}/openapi.json")
    logged_in = browser.get(f"{API}/openapi.json", HTTP_ACCEPT=HTML)

    assert anonymous.status_code == logged_in.status_code == 200
    assert logged_in.content == anonymous.content
    assert b"text/html" not in logged_in.content
