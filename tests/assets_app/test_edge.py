"""The edge kit (``assets_app.edge``) under the three APIs: a domain error has one status on
``/execution/``, ``/api/v1/`` and ``/api/v2/`` (each in its own body), a body over the cap is
413 on each, and every error answered inside a transaction rolls it back.

The errors are raised by a view of each face (its real base class: its handler, renderer and
parser) mounted by this module's ``urlpatterns``; the cap is tried on real routes.
"""

from __future__ import annotations

import inspect
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, connection
from django.http import Http404
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIClient

import assets_app.exceptions
import executionapi.exceptions
import operatorapi.exceptions
import publicapi.exceptions
from assets_app.edge.errors import (
    DOMAIN_ERROR_STATUS,
    PayloadTooLarge,
    domain_error_status,
)
from assets_app.edge.parsers import body_read
from assets_app.exceptions import AssetsError, RetryableError
from assets_app.models import AssetAlias
from assets_app.tokens import token_issue
from executionapi.views import ExecutionAPIView
from operatorapi.views import OperatorAPIMixin
from publicapi.auth import user_token_issue
from publicapi.base import PublicView
from tests.executionapi.conftest import state_url
from tests.factories import AssetFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

WRITTEN = "written-before-the-error"


def _domain_errors() -> list[type[AssetsError]]:
    """Every class of ``assets_app.exceptions``' hierarchy."""
    return [
        value
        for value in vars(assets_app.exceptions).values()
        if inspect.isclass(value) and issubclass(value, AssetsError)
    ]


# --- the map --------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [pytest.param(e, id=e.__name__) for e in _domain_errors()])
def test_every_domain_error_has_a_family_in_the_map(error):
    family = next(k for k in error.__mro__ if k in DOMAIN_ERROR_STATUS)

    assert family is not AssetsError or error is AssetsError, "give it a family's status"
    assert domain_error_status(error()) == DOMAIN_ERROR_STATUS[family]


def test_a_retryable_error_is_503_and_its_subclasses_too():
    retryable = [e for e in _domain_errors() if issubclass(e, RetryableError)]

    assert len(retryable) > 1
    assert {domain_error_status(e()) for e in retryable} == {503}


# --- one view per face, raising what the test asks ----------------------------------------

#: ``?error=`` → what the view raises after writing a row (``none``: it answers 200)
RAISED: dict[str, Callable[[], Exception]] = {
    **{e.__name__: e for e in _domain_errors()},
    "Http404": Http404,
    "DjangoValidationError": lambda: DjangoValidationError("bad"),
    "DatabaseError": lambda: DatabaseError("the server went away"),
    "bug": lambda: RuntimeError("a bug"),
}


def _write_then_raise(request: Request) -> Response:
    AssetAlias.objects.create(name=WRITTEN)
    error = request.query_params["error"]
    if error == "none":
        return Response({"written": True})
    raise RAISED[error]()


class ExecutionRaiser(ExecutionAPIView):
    authentication_classes = []
    permission_classes = []

    def post(self, request: Request) -> Response:
        return _write_then_raise(request)


class OperatorRaiser(OperatorAPIMixin):
    authentication_classes = []
    permission_classes = []

    def post(self, request: Request) -> Response:
        return _write_then_raise(request)


class PublicRaiser(PublicView):
    authentication_classes = []
    permission_classes = []

    def post(self, request: Request) -> Response:
        return _write_then_raise(request)


urlpatterns = [
    path("execution/raise", ExecutionRaiser.as_view()),
    path("api/v1/raise", OperatorRaiser.as_view()),
    path("api/v2/raise", PublicRaiser.as_view()),
]


def _execution_body(code: str, message: str) -> Any:
    return {"detail": {"reason": code, "message": message}}


def _operator_body(code: str, message: str) -> Any:
    return {"detail": message, "code": code}


def _public_body(code: str, message: str) -> Any:
    return {"detail": message}


#: face → (its prefix, its body of a domain error)
FACES = {
    "execution": ("/execution", _execution_body),
    "api-v1": ("/api/v1", _operator_body),
    "api-v2": ("/api/v2", _public_body),
}


def _raise(face: str, error: str) -> Any:
    prefix, _ = FACES[face]
    return APIClient().post(f"{prefix}/raise?error={error}")


@pytest.mark.urls(__name__)
@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(
    ("family", "status"),
    [pytest.param(f, s, id=f"{f.__name__}-{s}") for f, s in DOMAIN_ERROR_STATUS.items()],
)
def test_a_domain_error_has_the_same_status_on_every_face(face, family, status):
    # when
    response = _raise(face, family.__name__)
    # then
    error = family()
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert response.json() == FACES[face][1](error.code, error.message)
    if issubclass(family, RetryableError):
        assert response["Retry-After"] == "1"
    else:
        assert "Retry-After" not in response


@pytest.mark.urls(__name__)
@pytest.mark.parametrize("face", FACES)
def test_a_subclass_takes_its_familys_status_and_keeps_its_code(face):
    response = _raise(face, "AssetRegistrationError")

    error = assets_app.exceptions.AssetRegistrationError()
    assert (response.status_code, response["Retry-After"]) == (503, "1")
    assert response.json() == FACES[face][1](error.code, error.message)


@pytest.mark.urls(__name__)
@pytest.mark.parametrize(
    ("face", "body"),
    [
        pytest.param(
            "execution",
            {"detail": {"reason": "internal_error", "message": "Internal server error"}},
            id="execution",
        ),
        pytest.param(
            "api-v1", {"detail": "Internal server error", "code": "internal_error"}, id="api-v1"
        ),
        pytest.param("api-v2", {"detail": "Internal Server Error"}, id="api-v2"),
    ],
)
def test_a_bug_is_a_logged_500_in_the_faces_shape(face, body, caplog):
    response = _raise(face, "bug")

    assert response.status_code == 500
    assert response.json() == body
    assert "unhandled error in the" in caplog.text


# --- rollback -------------------------------------------------------------------------------


@pytest.fixture
def atomic_requests(monkeypatch):
    """Every request in a transaction, as ``ATOMIC_REQUESTS`` makes it."""
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)


@pytest.mark.urls(__name__)
@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(
    ("error", "status"),
    [
        pytest.param("none", 200, id="no-error-commits"),
        pytest.param("RetryableError", 503, id="domain-error"),
        pytest.param("ConflictError", 409, id="conflict"),
        pytest.param("Http404", 404, id="django-404"),
        pytest.param("DatabaseError", 500, id="database-error"),
        pytest.param("bug", 500, id="bug"),
    ],
)
def test_an_error_answer_rolls_the_request_back(
    transactional_db, atomic_requests, face, error, status
):
    # when the view writes a row, then fails
    response = _raise(face, error)
    # then the answer is the error's and the row is not committed
    assert response.status_code == status
    assert AssetAlias.objects.filter(name=WRITTEN).exists() is (error == "none")


@pytest.mark.urls(__name__)
@pytest.mark.parametrize("face", FACES)
def test_a_django_validation_error_is_the_faces_bad_input(face):
    response = _raise(face, "DjangoValidationError")

    assert response.status_code == {"execution": 422, "api-v1": 400, "api-v2": 400}[face]


# --- every route of a face answers errors through its handler -----------------------------


def _drf_views(prefix: str) -> list[tuple[str, type]]:
    """(route, view class) of every DRF view mounted under ``prefix``."""
    found = []

    def walk(patterns: list[Any], route: str) -> None:
        for pattern in patterns:
            here = route + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, here)
            elif isinstance(pattern, URLPattern) and hasattr(pattern.callback, "cls"):
                found.append((here, pattern.callback.cls))

    walk(get_resolver().url_patterns, "")
    return [(route, cls) for route, cls in found if route.startswith(prefix)]


@pytest.mark.parametrize(
    ("prefix", "handler"),
    [
        pytest.param("execution/", executionapi.exceptions.exception_handler, id="execution"),
        pytest.param("api/v1/", operatorapi.exceptions.exception_handler, id="api-v1"),
        pytest.param("api/v2/", publicapi.exceptions.exception_handler, id="api-v2"),
    ],
)
def test_every_route_of_a_face_answers_errors_through_its_handler(prefix, handler):
    views = _drf_views(prefix)
    # drf-spectacular's schema and docs views answer with the project's default handler
    schema_views = [(r, c) for r, c in views if c.__module__.startswith("drf_spectacular")]
    routes = [(r, c) for r, c in views if (r, c) not in schema_views]

    assert len(routes) > 5
    for route, cls in routes:
        assert cls().get_exception_handler() is handler, route


# --- the body cap ---------------------------------------------------------------------------


def test_body_read_refuses_a_declared_length_over_the_cap_before_reading(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10
    stream = io.BytesIO(b"x" * 11)

    with pytest.raises(PayloadTooLarge):
        body_read(stream, declared="11")
    assert stream.tell() == 0


def test_body_read_refuses_more_bytes_than_the_cap_whatever_is_declared(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10

    with pytest.raises(PayloadTooLarge):
        body_read(io.BytesIO(b"x" * 11), declared=None)
    assert body_read(io.BytesIO(b"x" * 10), declared="10") == b"x" * 10


LIMIT = 100
TOO_LARGE = f"Request body is too large (at most {LIMIT} bytes)"
BIG = json.dumps({"name": "a", "extra": {"k": "x" * 2 * LIMIT}})


def _execution_413() -> Any:
    ti = TaskInstanceFactory(state="running")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_issue(task_instance_id=ti.pk)}")
    return client.generic("PATCH", state_url(ti), BIG, content_type="application/json")


def _operator_413() -> Any:
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client.generic("POST", "/api/v1/asset-events", BIG, content_type="application/json")


def _public_413() -> Any:
    token = user_token_issue(user=User.objects.create_superuser("ops", "ops@example.com", "pw"))
    return Client().post(
        "/api/v2/assets/events",
        BIG,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def _login_413() -> Any:
    return Client().post("/auth/token", BIG, content_type="application/json")


@pytest.mark.parametrize(
    ("send", "body"),
    [
        pytest.param(
            _execution_413,
            {"detail": {"reason": "payload_too_large", "message": TOO_LARGE}},
            id="execution",
        ),
        pytest.param(
            _operator_413, {"detail": TOO_LARGE, "code": "payload_too_large"}, id="api-v1"
        ),
        pytest.param(_public_413, {"detail": TOO_LARGE}, id="api-v2"),
        pytest.param(_login_413, {"detail": TOO_LARGE}, id="auth-token"),
    ],
)
def test_a_body_over_the_cap_is_413_on_every_face(settings, send, body):
    # given
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = LIMIT
    AssetFactory(name="a")
    # when
    response = send()
    # then
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert response.json() == body
