"""Writes of pools (Airflow's ``Pool.create_or_update_pool``, ``delete_pool`` and the public
API's pool routes), shared by ``manage.py pools``, the admin and ``/api/v2/pools``.

``default_pool`` always exists: :func:`default_pool_ensure` creates it (after every
``migrate``, as the migration did), and no write deletes or renames it. A pool whose slots
change takes effect at the next claim (``services.runs.claims``), which locks the pool rows;
each write here locks the one row it changes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from assets_app.exceptions import PoolExistsError, PoolInputError, PoolNotFoundError
from assets_app.models import (
    DEFAULT_POOL,
    DEFAULT_POOL_ID,
    DEFAULT_POOL_SLOTS,
    POOL_NAME_LENGTH,
    Pool,
)
from assets_app.services.audit import Actor, event_log_record
from assets_app.services.inputs import KEEP, Keep

logger = logging.getLogger(__name__)

#: The largest ``slots``: the column is a 32-bit integer.
SLOTS_MAX = 2**31 - 1


def pool_name_check(name: Any) -> str:
    """A name that can be stored: 1 to 256 characters, no NUL."""
    if not isinstance(name, str):
        raise PoolInputError("name must be a string", field="name")
    if not name.strip():
        raise PoolInputError("name must not be empty", field="name")
    if "\x00" in name:
        raise PoolInputError("name must not contain NUL characters (\\u0000)", field="name")
    if len(name) > POOL_NAME_LENGTH:
        raise PoolInputError(
            f"name must be at most {POOL_NAME_LENGTH} characters (got {len(name)})", field="name"
        )
    return name


def pool_slots_check(slots: Any) -> int:
    """A whole number of slots, -1 (unlimited) or more."""
    if isinstance(slots, bool) or not isinstance(slots, int):
        raise PoolInputError("slots must be a whole number (-1: unlimited)", field="slots")
    if not -1 <= slots <= SLOTS_MAX:
        raise PoolInputError(
            f"slots must be -1 (unlimited) to {SLOTS_MAX}, got {slots}", field="slots"
        )
    return slots


def _description_check(description: Any) -> str | None:
    if description is not None and not isinstance(description, str):
        raise PoolInputError("description must be a string", field="description")
    if description is not None and "\x00" in description:
        raise PoolInputError(
            "description must not contain NUL characters (\\u0000)", field="description"
        )
    return description


def _include_deferred_check(value: Any) -> bool:
    if not isinstance(value, bool):
        raise PoolInputError("include_deferred must be true or false", field="include_deferred")
    return value


@dataclass(frozen=True)
class PoolSpec:
    """A pool as given to :func:`pool_set` / :func:`pool_create` (checked by :meth:`checked`)."""

    name: str
    slots: int
    description: str | None = None
    include_deferred: bool = False

    def checked(self) -> PoolSpec:
        pool_name_check(self.name)
        pool_slots_check(self.slots)
        _description_check(self.description)
        _include_deferred_check(self.include_deferred)
        return self


def _pool_extra(spec: PoolSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "slots": spec.slots,
        "description": spec.description,
        "include_deferred": spec.include_deferred,
    }


def pool_set(spec: PoolSpec, *, actor: Actor | None = None) -> Pool:
    """Create the pool or replace its slots, description and include_deferred (Airflow's
    ``pools set``; race-safe: the unique name decides); ``actor``'s ``post_pool`` event."""
    spec.checked()
    with transaction.atomic():
        Pool.objects.bulk_create(
            [
                Pool(
                    pool=spec.name,
                    slots=spec.slots,
                    description=spec.description,
                    include_deferred=spec.include_deferred,
                )
            ],
            update_conflicts=True,
            unique_fields=["pool"],
            update_fields=["slots", "description", "include_deferred"],
        )
        event_log_record(actor, "post_pool", extra=_pool_extra(spec))
    logger.info("pool %s set: %d slots", spec.name, spec.slots)
    return Pool.objects.get(pool=spec.name)


def pool_create(spec: PoolSpec, *, actor: Actor | None = None) -> Pool:
    """A new pool; ``PoolExistsError`` when the name is taken; ``actor``'s ``post_pool``
    event."""
    spec.checked()
    try:
        with transaction.atomic():
            pool = Pool.objects.create(
                pool=spec.name,
                slots=spec.slots,
                description=spec.description,
                include_deferred=spec.include_deferred,
            )
            event_log_record(actor, "post_pool", extra=_pool_extra(spec))
    except IntegrityError as exc:
        raise PoolExistsError(f"The Pool with name: `{spec.name}` already exists") from exc
    logger.info("pool %s created: %d slots", spec.name, spec.slots)
    return pool


def pool_update(
    *,
    name: str,
    slots: int | Keep = KEEP,
    description: str | Keep | None = KEEP,
    include_deferred: bool | Keep = KEEP,
    actor: Actor | None = None,
) -> Pool:
    """Change the given fields of pool ``name`` (``PoolNotFoundError`` if none);
    ``default_pool``'s description stays (Airflow lets only its slots and include_deferred
    change); ``actor``'s ``patch_pool`` event names the fields given."""
    if not isinstance(slots, Keep):
        pool_slots_check(slots)
    if not isinstance(description, Keep):
        _description_check(description)
    if not isinstance(include_deferred, Keep):
        _include_deferred_check(include_deferred)
    if name == DEFAULT_POOL and not isinstance(description, Keep):
        raise PoolInputError(
            "Only slots and include_deferred can be modified on Default Pool",
            field="description",
        )
    with transaction.atomic():
        pool = Pool.objects.select_for_update().filter(pool=name).first()
        if pool is None:
            raise PoolNotFoundError(f"The Pool with name: `{name}` was not found")
        changed = []
        if not isinstance(slots, Keep):
            pool.slots = slots
            changed.append("slots")
        if not isinstance(description, Keep):
            pool.description = description
            changed.append("description")
        if not isinstance(include_deferred, Keep):
            pool.include_deferred = include_deferred
            changed.append("include_deferred")
        if changed:
            pool.save(update_fields=changed)
        event_log_record(
            actor,
            "patch_pool",
            extra={"pool_name": name, **{field: getattr(pool, field) for field in changed}},
        )
    logger.info("pool %s updated: %s", name, ", ".join(changed) or "nothing")
    return pool


def pool_delete(*, name: str, actor: Actor | None = None) -> Pool:
    """Delete pool ``name`` (``PoolNotFoundError`` if none); ``default_pool`` is refused;
    ``actor``'s ``delete_pool`` event.

    Its task instances keep naming it: a scheduled one then waits until a pool of that name
    exists again (Airflow's behaviour); queued and running ones finish.
    """
    if name == DEFAULT_POOL:
        raise PoolInputError("Default Pool can't be deleted", field="name")
    with transaction.atomic():
        pool = Pool.objects.select_for_update().filter(pool=name).first()
        if pool is None:
            raise PoolNotFoundError(f"The Pool with name: `{name}` was not found")
        pool.delete()
        event_log_record(actor, "delete_pool", extra={"pool_name": name})
    logger.info("pool %s deleted", name)
    return pool


def pools_import(pools: Any, *, actor: Actor | None = None) -> list[Pool]:
    """Set every pool of an export (``{name: {slots, description, include_deferred}}``,
    Airflow's ``pools import`` file) in one transaction: all or none, ``actor``'s
    ``bulk_pools`` event naming them. ``PoolInputError`` names the pool and the field of the
    first bad entry."""
    if not isinstance(pools, Mapping):
        raise PoolInputError(
            'expected a JSON object {"NAME": {"slots": N, "description": "...", '
            '"include_deferred": false}, ...}',
            field="pools",
        )
    specs = []
    for name, entry in pools.items():
        if not isinstance(entry, Mapping):
            raise PoolInputError(
                f"pool {name!r}: expected an object with slots, description, include_deferred",
                field=str(name),
            )
        unknown = set(entry) - {"slots", "description", "include_deferred"}
        if unknown:
            raise PoolInputError(
                f"pool {name!r}: unknown key(s) {', '.join(sorted(map(str, unknown)))}",
                field=str(name),
            )
        if "slots" not in entry:
            raise PoolInputError(f"pool {name!r}: slots is required", field=str(name))
        spec = PoolSpec(
            name=name,
            slots=entry["slots"],
            description=entry.get("description"),
            include_deferred=entry.get("include_deferred", False),
        )
        try:
            specs.append(spec.checked())
        except PoolInputError as exc:
            raise PoolInputError(f"pool {name!r}: {exc.message}", **exc.context) from exc
    with transaction.atomic():
        done = [pool_set(spec) for spec in specs]
        event_log_record(actor, "bulk_pools", extra={"pools": [spec.name for spec in specs]})
        return done


def pools_bulk_record(*, actor: Actor, done: Mapping[str, list[str]]) -> None:
    """``actor``'s ``bulk_pools`` event for a bulk request (``/api/v2``'s ``PATCH /pools``,
    each entity written in its own transaction): the pools each action did."""
    if any(done.values()):
        event_log_record(actor, "bulk_pools", extra=dict(done))


def pools_export() -> dict[str, dict[str, Any]]:
    """Every pool as Airflow's ``pools export`` writes it."""
    return {
        pool.pool: {
            "description": pool.description,
            "slots": pool.slots,
            "include_deferred": pool.include_deferred,
        }
        for pool in Pool.objects.order_by("pool")
    }


def default_pool_ensure() -> bool:
    """Create ``default_pool`` (128 slots) if it is missing; whether it was."""
    _, created = Pool.objects.get_or_create(
        pool=DEFAULT_POOL,
        defaults={
            "id": DEFAULT_POOL_ID,
            "slots": DEFAULT_POOL_SLOTS,
            "description": "Default pool",
        },
    )
    if created:
        logger.info("default_pool created with %d slots", DEFAULT_POOL_SLOTS)
    return created
