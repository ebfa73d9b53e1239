"""``/api/v2/pools`` (Airflow's ``pools.py`` routes): list, get, create, patch, delete and
bulk, over the pool selectors and services every face shares (``assets_app.selectors.runs``,
``assets_app.services.runs.pools``). ``default_pool`` is never deleted, and only its slots and
include_deferred change, as in Airflow."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from django.db import transaction
from pydantic import BeforeValidator, Field, field_validator
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from assets_app.exceptions import AssetsError, PoolExistsError, PoolNotFoundError
from assets_app.models import DEFAULT_POOL, Pool
from assets_app.selectors.runs import pool_get, pool_list, pools_slots
from assets_app.services.audit import Actor
from assets_app.services.inputs import KEEP
from assets_app.services.runs.pools import (
    PoolSpec,
    pool_create,
    pool_delete,
    pool_set,
    pool_update,
    pools_bulk_record,
)
from publicapi.base import PublicView, page, path_key
from publicapi.exceptions import BadRequest, Conflict, NotFound
from publicapi.filters import search
from publicapi.params import Body, Page, Text, UpdateMaskQuery, body_parse, order_by_parse
from publicapi.params import query_parse as parse

A = "assets_app."


def _whole(value: Any) -> Any:
    """A whole float (``3.0``) is the integer JSON Schema says it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Slots = Annotated[int, BeforeValidator(_whole), Field(ge=-1)]


def _no_team(team_name: str | None) -> str | None:
    """Airflow's ``validate_team_name`` with ``[core] multi_team`` off, the registry's only
    mode."""
    if team_name is not None:
        raise ValueError(
            "team_name cannot be set when multi_team mode is disabled. "
            "Please contact your administrator."
        )
    return team_name


class PoolBody(Body):
    """Airflow's ``PoolBody``."""

    name: Annotated[Text, Field(max_length=256)]
    slots: Slots
    description: Text | None = None
    include_deferred: bool = False
    team_name: Annotated[Text, Field(max_length=50)] | None = None

    _team = field_validator("team_name")(_no_team)

    def spec(self) -> PoolSpec:
        return PoolSpec(
            name=self.name,
            slots=self.slots,
            description=self.description,
            include_deferred=self.include_deferred,
        )


class PoolPatchBody(Body):
    """Airflow's ``PoolPatchBody`` (the name under ``pool``)."""

    pool: Text | None = None
    slots: Slots | None = None
    description: Text | None = None
    include_deferred: bool | None = None
    team_name: Annotated[Text, Field(max_length=50)] | None = None

    _team = field_validator("team_name")(_no_team)


class PoolFilter(Page):
    """``GET /pools``."""

    pool_name_pattern: Text | None = None
    pool_name_prefix_pattern: Text | None = None
    order_by: list[Text] | None = None

    ORDER: ClassVar = {"id": "id", "pool": "pool", "name": "pool"}


def render_pools(pools: list[Pool]) -> list[dict[str, Any]]:
    """Airflow's ``PoolResponse`` of each (1 query for the slots of all)."""
    slots = pools_slots(pool.pool for pool in pools)
    rendered = []
    for pool in pools:
        used = slots[pool.pool]
        rendered.append(
            {
                "name": pool.pool,
                "slots": pool.slots,
                "description": pool.description,
                "include_deferred": pool.include_deferred,
                "occupied_slots": used.occupied(pool),
                "running_slots": used.running,
                "queued_slots": used.queued,
                "scheduled_slots": used.scheduled,
                "open_slots": used.open(pool),
                "deferred_slots": used.deferred,
                "team_name": None,
            }
        )
    return rendered


def _pool(name: str) -> Pool:
    try:
        return pool_get(name=path_key(name))
    except PoolNotFoundError as exc:
        raise NotFound(f"The Pool with name: `{name}` was not found") from exc


class PoolListView(PublicView):
    required_permissions: ClassVar = {
        "GET": [A + "view_pool"],
        "POST": [A + "add_pool"],
        "PATCH": [A + "add_pool", A + "change_pool", A + "delete_pool"],
    }

    def get(self, request: Request) -> Response:
        q = parse(PoolFilter, request.query_params, lists=("order_by",))
        rows = search(pool_list(), "pool", q.pool_name_pattern, prefix=False)
        rows = search(rows, "pool", q.pool_name_prefix_pattern, prefix=True)
        rows = rows.order_by(*order_by_parse(q.order_by, allowed=q.ORDER, default="id"), "id")
        pools, total = page(rows, q)
        return Response({"pools": render_pools(pools), "total_entries": total})

    def post(self, request: Request) -> Response:
        body = body_parse(PoolBody, request)
        try:
            pool = pool_create(body.spec(), actor=Actor.of_request(request, "rest_api"))
        except PoolExistsError as exc:
            raise Conflict(
                {
                    "reason": "Unique constraint violation",
                    "statement": "hidden",
                    "orig_error": "hidden",
                    "message": exc.message,
                }
            ) from exc
        return Response(render_pools([pool])[0], status=status.HTTP_201_CREATED)

    def patch(self, request: Request) -> Response:
        """Airflow's bulk: ``{"actions": [{"action": "create"|"update"|"delete", ...}]}``."""
        body = body_parse(BulkBody, request)
        done: dict[str, Any] = {"create": None, "update": None, "delete": None}
        for action in body.actions:
            done[action.action] = _bulk_action(action)
        pools_bulk_record(
            actor=Actor.of_request(request, "rest_api"),
            done={name: one["success"] for name, one in done.items() if one},
        )
        return Response(done)


class PoolDetailView(PublicView):
    required_permissions: ClassVar = {
        "GET": [A + "view_pool"],
        "PATCH": [A + "change_pool"],
        "DELETE": [A + "delete_pool"],
    }

    def get(self, request: Request, pool_name: str) -> Response:
        return Response(render_pools([_pool(pool_name)])[0])

    def patch(self, request: Request, pool_name: str) -> Response:
        body = body_parse(PoolPatchBody, request)
        if body.pool and body.pool != pool_name:
            raise BadRequest(
                "Invalid body, pool name from request body doesn't match uri parameter"
            )
        pool = _pool(pool_name)
        mask = parse(UpdateMaskQuery, request.query_params, lists=("update_mask",)).update_mask
        if pool.pool == DEFAULT_POOL and not (
            mask and all(field.strip() in {"slots", "include_deferred"} for field in mask)
        ):
            raise BadRequest("Only slots and included_deferred can be modified on Default Pool")
        return Response(
            render_pools([_patch(pool, body, mask, Actor.of_request(request, "rest_api"))])[0]
        )

    def delete(self, request: Request, pool_name: str) -> Response:
        if pool_name == DEFAULT_POOL:
            raise BadRequest("Default Pool can't be deleted")
        try:
            pool_delete(name=path_key(pool_name), actor=Actor.of_request(request, "rest_api"))
        except PoolNotFoundError as exc:
            raise NotFound(f"The Pool with name: `{pool_name}` was not found") from exc
        return Response(status=status.HTTP_204_NO_CONTENT)


def _patch(pool: Pool, body: PoolPatchBody, mask: list[str] | None, actor: Actor) -> Pool:
    given = set(body.model_fields_set) - {"pool", "team_name"}
    if mask is not None:
        given &= {field.strip() for field in mask}
    if "slots" in given and body.slots is None:
        raise BadRequest("slots must be a whole number (-1: unlimited), not null")
    if "include_deferred" in given and body.include_deferred is None:
        raise BadRequest("include_deferred must be true or false, not null")
    return pool_update(
        name=pool.pool,
        slots=body.slots if "slots" in given and body.slots is not None else KEEP,
        description=body.description if "description" in given else KEEP,
        include_deferred=body.include_deferred
        if "include_deferred" in given and body.include_deferred is not None
        else KEEP,
        actor=actor,
    )


# --- bulk -------------------------------------------------------------------------------------


class BulkCreate(Body):
    action: Literal["create"]
    entities: list[PoolBody]
    action_on_existence: Literal["fail", "skip", "overwrite"] = "fail"


class BulkUpdate(Body):
    action: Literal["update"]
    entities: list[PoolBody]
    update_mask: list[Text] | None = None
    action_on_non_existence: Literal["fail", "skip"] = "fail"


class BulkDelete(Body):
    action: Literal["delete"]
    entities: list[Text | PoolBody]
    action_on_non_existence: Literal["fail", "skip"] = "fail"


class BulkBody(Body):
    """Airflow's ``BulkBody[PoolBody]``."""

    actions: list[Annotated[BulkCreate | BulkUpdate | BulkDelete, Field(discriminator="action")]]


def _bulk_action(action: BulkCreate | BulkUpdate | BulkDelete) -> dict[str, Any]:
    """One action, each entity in its own transaction: Airflow's ``BulkActionResponse``
    (``success``: the names done, ``errors``: ``{"error": ..., "status_code": ...}``)."""
    success: list[str] = []
    errors: list[dict[str, Any]] = []
    for entity in action.entities:
        name = entity if isinstance(entity, str) else entity.name
        try:
            with transaction.atomic():
                _bulk_one(action, entity)
        except AssetsError as exc:
            code = (
                status.HTTP_404_NOT_FOUND
                if isinstance(exc, PoolNotFoundError)
                else status.HTTP_409_CONFLICT
                if isinstance(exc, PoolExistsError)
                else status.HTTP_400_BAD_REQUEST
            )
            errors.append({"error": exc.message, "status_code": code})
        else:
            success.append(name)
    return {"success": success, "errors": errors}


def _bulk_one(action: BulkCreate | BulkUpdate | BulkDelete, entity: str | PoolBody) -> None:
    if isinstance(action, BulkCreate):
        assert isinstance(entity, PoolBody)  # noqa: S101 - the body's type
        if action.action_on_existence == "overwrite":
            pool_set(entity.spec())
            return
        if action.action_on_existence == "skip" and Pool.objects.filter(pool=entity.name).exists():
            return
        pool_create(entity.spec())
        return
    if isinstance(action, BulkUpdate):
        assert isinstance(entity, PoolBody)  # noqa: S101 - the body's type
        if not Pool.objects.filter(pool=entity.name).exists():
            if action.action_on_non_existence == "skip":
                return
            raise PoolNotFoundError(f"The Pool with name: `{entity.name}` was not found")
        mask = set(action.update_mask or ("slots", "description", "include_deferred"))
        pool_update(
            name=entity.name,
            slots=entity.slots if "slots" in mask else KEEP,
            description=entity.description
            if "description" in mask and entity.name != DEFAULT_POOL
            else KEEP,
            include_deferred=entity.include_deferred if "include_deferred" in mask else KEEP,
        )
        return
    name = entity if isinstance(entity, str) else entity.name
    if not Pool.objects.filter(pool=name).exists() and action.action_on_non_existence == "skip":
        return
    pool_delete(name=name)
