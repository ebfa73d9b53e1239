"""The asset page's "create asset event": an operator's event with an ``extra`` and an optional
partition key, through the same service as ``manage.py create_asset_event``
(``assets_app.services.assets.events.asset_event_create_manual``: it queues the consumers), and
recorded in the asset's admin history with the user who did it."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from assets_app.admin.panels import waiting_consumers
from assets_app.exceptions import InvalidInputError
from assets_app.models import PARTITION_KEY_LENGTH, Asset, AssetEvent
from assets_app.services.assets.events import asset_event_create_manual
from assets_app.services.audit import Actor
from assets_app.validators import json_value_problem

#: The model permission that allows emitting an event (Django's "add asset event").
EMIT_PERMISSION = "assets_app.add_assetevent"


class _AsciiJSONField(forms.JSONField):
    """Shows a typed value back as ASCII JSON, so a lone surrogate (refused by ``clean_extra``)
    is redisplayed as ``\\ud800`` instead of breaking the page's UTF-8."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, ensure_ascii=True, cls=self.encoder)


class EmitEventForm(forms.Form):
    extra = _AsciiJSONField(
        required=False,
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 70, "class": "vLargeTextField"}),
        help_text='A JSON object stored with the event, e.g. {"rows": 42}. Empty means {}.',
    )
    partition_key = forms.CharField(
        required=False,
        max_length=PARTITION_KEY_LENGTH,
        strip=True,
        help_text="Optional. An event with a partition key queues no (non-partitioned) DAG.",
    )

    def clean_extra(self) -> dict[str, Any]:
        extra = self.cleaned_data.get("extra")
        if extra is None:
            return {}
        if not isinstance(extra, dict):
            raise forms.ValidationError(
                f"Enter a JSON object ({{...}}), not a JSON {_json_kind(extra)}."
            )
        problem = json_value_problem(extra, max_bytes=settings.ASSET_EVENT_EXTRA_MAX_BYTES)
        if problem is not None:
            raise forms.ValidationError(problem.describe("extra"))
        return extra

    def clean_partition_key(self) -> str | None:
        return self.cleaned_data.get("partition_key") or None


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "number"


def emit_event_view(
    model_admin: admin.ModelAdmin[Asset], request: HttpRequest, object_id: str
) -> HttpResponse:
    """GET: the form; POST: create the event, log it on the asset, back to the asset page."""
    asset = model_admin.get_object(request, object_id)
    if asset is None:
        return model_admin._get_obj_does_not_exist_redirect(  # type: ignore[attr-defined,no-any-return]
            request, Asset._meta, object_id
        )
    if not (
        model_admin.has_view_permission(request, asset) and request.user.has_perm(EMIT_PERMISSION)
    ):
        raise PermissionDenied
    form = EmitEventForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            with transaction.atomic():
                event = asset_event_create_manual(
                    name=asset.name,
                    uri=asset.uri,
                    extra=form.cleaned_data["extra"],
                    partition_key=form.cleaned_data["partition_key"],
                    actor=Actor.of_request(request, "ui"),
                )
                model_admin.log_change(request, asset, _history_message(event))
        except InvalidInputError as exc:
            form.add_error(None, str(exc))
        else:
            waiting = ", ".join(
                f"{dag.dag_id} (paused)" if dag.is_paused else dag.dag_id
                for dag in waiting_consumers([event])[event.pk]
            )
            model_admin.message_user(
                request,
                f"Created asset event {event.pk} on {asset.name}; DAGs waiting for it: "
                f"{waiting or 'none'}.",
                messages.SUCCESS,
            )
            return HttpResponseRedirect(reverse("admin:assets_app_asset_change", args=[asset.pk]))
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Create asset event on {asset.name}",
        "subtitle": asset.uri,
        "opts": Asset._meta,
        "original": asset,
        "form": form,
        "extra_example": json.dumps({"rows": 42, "source": "manual"}),
    }
    return TemplateResponse(request, "admin/assets_app/asset/emit_event.html", context)


def _history_message(event: AssetEvent) -> list[dict[str, Any]]:
    """The change message (``LogEntry``'s JSON form): "Added asset event "event N ..."."""
    return [{"added": {"name": "asset event", "object": str(event)}}]
