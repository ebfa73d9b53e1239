"""What every ``/api/v2/`` view shares: its authentication, permissions and error handler,
and the path keys and pages of Airflow's routes."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from django.db.models import Model, QuerySet
from django.http import Http404
from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from assets_app.edge.outage import OutageRetryMixin
from publicapi.auth import BearerAuthentication
from publicapi.exceptions import exception_handler
from publicapi.params import Page
from publicapi.permissions import RoutePermissions

V = "assets_app.view_"
JSON = "application/json"
NDJSON = "application/x-ndjson"
TEXT = "text/plain"
ANY = "*/*"
ModelT = TypeVar("ModelT", bound=Model)


class PublicView(OutageRetryMixin, APIView):
    authentication_classes = [BearerAuthentication]
    permission_classes = [RoutePermissions]
    renderer_classes = [JSONRenderer]
    parser_classes: list[Any] = []  # bodies are read raw, under the cap, by ``body_parse``
    required_permissions: ClassVar[dict[str, list[str]]] = {}
    schema = None  # described by Airflow's own document (publicapi.schema), not drf-spectacular

    def get_exception_handler(self) -> Any:
        return exception_handler


class NotAcceptable(APIException):
    status_code = status.HTTP_406_NOT_ACCEPTABLE


def accepted(header: str, *, offered: tuple[str, ...]) -> str:
    """What to answer for an ``Accept`` header, by its start as Airflow reads it (no header:
    ``*/*``, JSON), among the media types a route ``offered``; else Airflow's 406."""
    for media_type in (ANY, *offered):
        if header.startswith(media_type):
            return JSON if media_type == ANY else media_type
    choices = f"{', '.join(offered[:-1])} or {offered[-1]}" if len(offered) > 1 else offered[0]
    raise NotAcceptable(f"Only {choices} is supported")


def path_id(value: str) -> int:
    """A path id: an integer that fits a database id, else no such row."""
    if not value.isdigit() or len(value) > 18:
        raise Http404
    return int(value)


def path_key(value: str) -> str:
    """A path key (dag id, run id …): one holding NUL can name no row."""
    if "\x00" in value:
        raise Http404
    return value


def page_rows(rows: QuerySet[ModelT], params: Page) -> list[ModelT]:
    """The page of ``rows`` that ``limit`` and ``offset`` ask for."""
    return list(rows[params.bounds])


def page(rows: QuerySet[ModelT], params: Page) -> tuple[list[ModelT], int]:
    """A page of ``rows`` and how many there are in all (``total_entries``)."""
    return page_rows(rows, params), rows.count()
