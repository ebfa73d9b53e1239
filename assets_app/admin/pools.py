"""Pools: list with their running, queued and open slots; add, edit and delete through the pool
services (``assets_app.services.runs.pools``). ``default_pool`` cannot be deleted, and only its
slots and include_deferred change, as in Airflow."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from assets_app.exceptions import AssetsError, InvalidInputError
from assets_app.models import DEFAULT_POOL, Pool
from assets_app.selectors.runs import PoolSlots, pools_slots
from assets_app.services.audit import Actor
from assets_app.services.inputs import KEEP
from assets_app.services.runs.pools import PoolSpec, pool_delete, pool_set, pool_update


class PoolForm(forms.ModelForm[Pool]):
    class Meta:
        model = Pool
        fields = ["pool", "slots", "description", "include_deferred"]
        help_texts = {
            "slots": "-1: unlimited.",
            "include_deferred": "Deferred task instances take slots too.",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        name = data.get("pool") or self.instance.pool
        slots = data.get("slots")
        spec = PoolSpec(
            name=name or "",
            slots=slots if isinstance(slots, int) else 0,
            description=data.get("description") or None,
            include_deferred=bool(data.get("include_deferred")),
        )
        try:
            spec.checked()
        except InvalidInputError as error:
            field = {"name": "pool"}.get(error.context.get("field", ""), error.context.get("field"))
            self.add_error(field if field in self.fields else None, error.message)
        return data


@admin.register(Pool)
class PoolAdmin(admin.ModelAdmin[Pool]):
    form = PoolForm
    list_display = ("pool", "slots", "running", "queued", "open", "include_deferred", "description")
    search_fields = ("pool", "description")
    list_filter = ("include_deferred",)
    ordering = ("pool",)

    def get_readonly_fields(self, request: HttpRequest, obj: Pool | None = None) -> Any:
        if obj is None:
            return ()
        return ("pool", "description") if obj.pool == DEFAULT_POOL else ("pool",)

    def has_delete_permission(self, request: HttpRequest, obj: Pool | None = None) -> bool:
        if obj is not None and obj.pool == DEFAULT_POOL:
            return False
        return super().has_delete_permission(request, obj)

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        pools = list(changelist.result_list)
        self._slots = pools_slots(pool.pool for pool in pools)  # one query for the page
        return changelist

    def _used(self, obj: Pool) -> PoolSlots:
        slots = getattr(self, "_slots", {})
        return slots[obj.pool] if obj.pool in slots else pools_slots([obj.pool])[obj.pool]

    @admin.display(description="running slots")
    def running(self, obj: Pool) -> int:
        return self._used(obj).running

    @admin.display(description="queued slots")
    def queued(self, obj: Pool) -> int:
        return self._used(obj).queued

    @admin.display(description="open slots")
    def open(self, obj: Pool) -> str:
        free = self._used(obj).open(obj)
        return "unlimited" if free == -1 else str(free)

    def save_model(self, request: HttpRequest, obj: Pool, form: Any, change: bool) -> None:
        data = form.cleaned_data
        try:
            if change:
                saved = pool_update(
                    name=obj.pool,
                    slots=data["slots"],
                    description=KEEP if obj.pool == DEFAULT_POOL else data.get("description"),
                    include_deferred=bool(data.get("include_deferred")),
                    actor=Actor.of_request(request, "ui"),
                )
            else:
                saved = pool_set(
                    PoolSpec(
                        name=data["pool"],
                        slots=data["slots"],
                        description=data.get("description") or None,
                        include_deferred=bool(data.get("include_deferred")),
                    ),
                    actor=Actor.of_request(request, "ui"),
                )
        except AssetsError as error:
            self.message_user(request, error.message, messages.ERROR)
            return
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Pool) -> None:
        try:
            pool_delete(name=obj.pool, actor=Actor.of_request(request, "ui"))
        except AssetsError as error:
            self.message_user(request, error.message, messages.ERROR)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Pool]) -> None:
        for name in queryset.values_list("pool", flat=True):
            self.delete_model(request, Pool(pool=name))
