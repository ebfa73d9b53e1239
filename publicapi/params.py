"""Query parameters and bodies parsed as Airflow's FastAPI app parses them (pydantic), so that a
bad value gets Airflow's 422 body: ``{"detail": [{"type", "loc": ["query", name], "msg",
"input", ...}]}``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from django.http import HttpRequest, QueryDict
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from assets_app.edge.parsers import request_body
from publicapi.exceptions import BadRequest, Unprocessable

ModelT = TypeVar("ModelT", bound=BaseModel)

#: Airflow's ``[api] fallback_page_limit`` and ``maximum_page_limit`` defaults.
DEFAULT_LIMIT = 50
MAXIMUM_LIMIT = 100
#: The largest offset sent to the database (a 64-bit integer column's range, halved).
OFFSET_MAX = 2**62


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("String should not contain the NUL character")
    return value


def _utc(value: datetime) -> datetime:
    """Aware and representable in UTC (naive values are UTC, as Airflow's)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("Datetime is out of range once converted to UTC") from exc


def _iso_text(value: Any) -> Any:
    """A date-time in a query is ISO 8601 text, not a number of seconds (``0.5``)."""
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        raise ValueError("Input should be an ISO 8601 date-time")
    return value


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
Text = Annotated[str, AfterValidator(_no_nul)]
#: Airflow's notes (a run's, a clear's): at most 1000 characters (pydantic's
#: ``string_too_long`` when longer: the length is checked on the string, before ``_no_nul``)
Note = Annotated[str, Field(max_length=1000), AfterValidator(_no_nul)]
#: Airflow's ``ID_LEN`` keys (a variable's)
Key = Annotated[str, Field(max_length=250), AfterValidator(_no_nul)]
UtcDatetime = Annotated[datetime, BeforeValidator(_iso_text), AfterValidator(_utc)]


def _datetime_text(value: Any) -> Any:
    """In a JSON body a date-time is ISO 8601 text (or null), never a number."""
    if value is not None and not isinstance(value, str):
        raise ValueError("Input should be an ISO 8601 date-time string")
    return value


#: A date-time in a strict JSON body: text parsed as ISO 8601 (strict mode parses no text)
BodyDatetime = Annotated[UtcDatetime | None, Field(strict=False), BeforeValidator(_datetime_text)]
Limit = Annotated[int, Field(ge=0)]
Offset = Annotated[int, Field(ge=0)]


class Query(BaseModel):
    """Base of a route's query parameters; unknown ones are ignored, as FastAPI does."""

    model_config = ConfigDict(extra="ignore")


class Page(Query):
    limit: Limit = DEFAULT_LIMIT
    offset: Offset = 0

    @property
    def bounds(self) -> slice:
        if self.offset > OFFSET_MAX:  # past any table's end, and past the database's integers
            return slice(0, 0)
        return slice(self.offset, self.offset + min(self.limit, MAXIMUM_LIMIT))


class UpdateMaskQuery(Query):
    """A patch's ``update_mask``: the fields it may write (all those sent, when not given)."""

    update_mask: list[Text] | None = None


class SourceQuery(Query):
    """``get_dag_source``'s ``version_number``: the DAG's one version is 1."""

    version_number: int | None = None


class Body(BaseModel):
    """A JSON body: types exact (``0`` is no boolean), unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True)


def _errors(exc: ValidationError, where: str) -> list[dict[str, Any]]:
    errors = []
    for error in exc.errors(include_url=False):
        item: dict[str, Any] = {
            "type": error["type"],
            "loc": [where, *error["loc"]],
            "msg": error["msg"],
            "input": error.get("input"),
        }
        if "ctx" in error:
            item["ctx"] = {k: _plain(v) for k, v in error["ctx"].items()}
        errors.append(item)
    plain: list[dict[str, Any]] = json.loads(json.dumps(errors, default=str))
    return plain


def _plain(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def query_parse(model: type[ModelT], params: QueryDict, *, lists: Iterable[str] = ()) -> ModelT:
    """``params`` as ``model``: list parameters (repeated, ``lists``) as lists, others as the
    last value given. Raises ``Unprocessable`` with Airflow's body."""
    data: dict[str, Any] = {}
    for name in model.model_fields:
        if name not in params:
            continue
        data[name] = params.getlist(name) if name in lists else params.getlist(name)[-1]
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Unprocessable(_errors(exc, "query")) from exc


def path_parse(model: type[ModelT], values: dict[str, str]) -> ModelT:
    """Path parameters as ``model`` (FastAPI's 422 at ``["path", name]`` for a bad one)."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise Unprocessable(_errors(exc, "path")) from exc


def body_parse(model: type[ModelT], request: HttpRequest, *, optional: bool = False) -> ModelT:
    """The JSON body of ``request`` as ``model`` (FastAPI's 422 ``json_invalid`` for broken
    JSON); with ``optional``, no body (or ``null``) is the model's defaults, as FastAPI's
    ``Body | None``. A body over the size cap is ``PayloadTooLarge`` (413)."""
    raw = request_body(request)
    if optional and not raw:
        return model()
    try:
        data = json.loads(raw or b"null", parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise Unprocessable(
            [
                {
                    "type": "json_invalid",
                    "loc": ["body", 0],
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": str(exc)},
                }
            ]
        ) from exc
    if data is None and optional:
        return model()
    if data is None:
        raise Unprocessable(
            [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Unprocessable(_errors(exc, "body")) from exc


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def order_by_parse(values: list[str] | None, *, allowed: dict[str, str], default: str) -> list[str]:
    """Airflow's ``order_by`` (``name``, ``-name``; several allowed) as Django ordering; a
    field not in ``allowed`` (API name → model field) is Airflow's 400."""
    ordering = []
    for value in values or [default]:
        descending = value.startswith("-")
        name = value.lstrip("-")
        if name not in allowed:
            raise BadRequest(
                f"Ordering with '{name}' is disallowed or the attribute does not exist on the model"
            )
        ordering.append(("-" if descending else "") + allowed[name])
    return ordering
