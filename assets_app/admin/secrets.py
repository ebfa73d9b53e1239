"""Variables and connections: list and edit, every write through their services.

Secrets never reach a page: lists show no value of a connection's password or extra (only
whether one is stored), forms render the password and extra fields empty (left blank, the
stored value is kept; a box clears it), and the encrypted columns are no form field. A
variable's value is shown in its form masked as both APIs show it (Airflow's masking): under a
sensitive key it behaves as the password does; in a JSON value each sensitive key's value is
``***``, and a ``***`` left in place keeps the stored secret. History pages name the changed
fields, never values.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from assets_app.exceptions import AssetsError, InvalidInputError
from assets_app.masking import is_sensitive
from assets_app.models import Connection, Variable
from assets_app.selectors.secrets import variable_masked_value, variable_value
from assets_app.services.audit import Actor
from assets_app.services.inputs import Keep
from assets_app.services.secrets.connections import (
    ConnectionFields,
    checked_extra,
    connection_create,
    connection_delete,
    connection_id_check,
    connection_update,
)
from assets_app.services.secrets.variables import variable_delete, variable_key_check, variable_set

KEEP_HELP = "Leave blank to keep the stored {what}; it is never shown."


def _report(form: forms.BaseForm, error: InvalidInputError) -> None:
    field = error.context.get("field")
    form.add_error(field if field in form.fields else None, error.message)


class VariableForm(forms.ModelForm[Variable]):
    value = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False, strip=False)

    class Meta:
        model = Variable
        fields = ["key", "description"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        instance = self.instance
        self.value_hidden = instance.pk is not None and is_sensitive(instance.key)
        if self.value_hidden:
            self.fields["value"].help_text = KEEP_HELP.format(what="value (its key is sensitive)")
        elif instance.pk is not None:  # a JSON value's sensitive keys show ``***``
            self.initial["value"] = variable_masked_value(instance) or ""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "key" in self.fields:  # on a change page the key is read-only
            try:
                variable_key_check(data.get("key") or "")
            except InvalidInputError as error:
                _report(self, error)
        return data


@admin.register(Variable)
class VariableAdmin(admin.ModelAdmin[Variable]):
    form = VariableForm
    list_display = ("key", "description", "is_encrypted")
    search_fields = ("key", "description")
    list_filter = ("is_encrypted",)
    ordering = ("key",)

    def get_readonly_fields(self, request: HttpRequest, obj: Variable | None = None) -> Any:
        return ("key",) if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: Variable, form: Any, change: bool) -> None:
        value = form.cleaned_data.get("value")
        description = form.cleaned_data.get("description") or None
        if form.value_hidden and not value:
            saved = Variable.objects.get(pk=obj.pk)
            value = variable_value(saved)
        saved = variable_set(
            actor=Actor.of_request(request, "ui"),
            key=obj.key,
            value=value,
            description=description,
            keep_masked=True,
        )
        obj.pk = saved.pk
        obj.is_encrypted = saved.is_encrypted

    def delete_model(self, request: HttpRequest, obj: Variable) -> None:
        variable_delete(actor=Actor.of_request(request, "ui"), key=obj.key)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Variable]) -> None:
        for key in queryset.values_list("key", flat=True):
            variable_delete(actor=Actor.of_request(request, "ui"), key=key)


class ConnectionForm(forms.ModelForm[Connection]):
    password = forms.CharField(
        widget=forms.PasswordInput(render_value=False),
        required=False,
        strip=False,
        help_text=KEEP_HELP.format(what="password"),
    )
    clear_password = forms.BooleanField(required=False, help_text="Remove the stored password.")
    extra = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        help_text="A JSON object. " + KEEP_HELP.format(what="extra"),
    )
    clear_extra = forms.BooleanField(required=False, help_text="Remove the stored extra.")

    class Meta:
        model = Connection
        fields = ["conn_id", "conn_type", "description", "host", "schema", "login", "port"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            if self.instance.pk is None:
                connection_id_check(data.get("conn_id") or "")
            checked_extra(data.get("extra") or None)
            self.changes().check()
        except InvalidInputError as error:
            _report(self, error)
        return data

    def changes(self) -> ConnectionFields:
        """The fields as the services take them; blank secrets are ``KEEP``."""
        data = self.cleaned_data
        changes = ConnectionFields(
            conn_type=data.get("conn_type") or "",
            description=data.get("description") or None,
            host=data.get("host") or None,
            schema=data.get("schema") or None,
            login=data.get("login") or None,
            port=data.get("port"),
        )
        if data.get("clear_password"):
            changes.password = None
        elif data.get("password"):
            changes.password = data["password"]
        if data.get("clear_extra"):
            changes.extra = None
        elif data.get("extra"):
            changes.extra = data["extra"]
        return changes


@admin.register(Connection)
class ConnectionAdmin(admin.ModelAdmin[Connection]):
    form = ConnectionForm
    list_display = ("conn_id", "conn_type", "host", "port", "login", "has_password", "has_extra")
    search_fields = ("conn_id", "conn_type", "host", "description")
    list_filter = ("conn_type",)
    ordering = ("conn_id",)

    @admin.display(boolean=True, description="password")
    def has_password(self, obj: Connection) -> bool:
        return obj.has_password

    @admin.display(boolean=True, description="extra")
    def has_extra(self, obj: Connection) -> bool:
        return obj.has_extra

    def get_readonly_fields(self, request: HttpRequest, obj: Connection | None = None) -> Any:
        return ("conn_id",) if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: Connection, form: Any, change: bool) -> None:
        changes = form.changes()
        if change:
            saved = connection_update(
                actor=Actor.of_request(request, "ui"), conn_id=obj.conn_id, changes=changes
            )
        else:
            if isinstance(changes.password, Keep):
                changes.password = None
            if isinstance(changes.extra, Keep):
                changes.extra = None
            saved = connection_create(
                actor=Actor.of_request(request, "ui"), conn_id=obj.conn_id, values=changes
            )
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Connection) -> None:
        try:
            connection_delete(actor=Actor.of_request(request, "ui"), conn_id=obj.conn_id)
        except AssetsError as error:
            self.message_user(request, error.message, messages.ERROR)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Connection]) -> None:
        for conn_id in queryset.values_list("conn_id", flat=True):
            connection_delete(actor=Actor.of_request(request, "ui"), conn_id=conn_id)
