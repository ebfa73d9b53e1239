"""A DAG's params (Airflow's ``Param``: a default, a description and a JSON schema) and the
check of a run's ``conf`` against them, as Airflow 3.3 makes it when it creates a run
(``SerializedDAG.create_dagrun``: ``params.deep_merge(conf).validate()``).

The stored form is Airflow's serialized one without its type tags: a list of
``[name, {"default": V, "description": D, "schema": S}]`` pairs in the DAG's order (a list, as
Airflow's serializer writes it, so the order survives a ``jsonb`` column); ``default`` is
absent when the param has none (Airflow's ``NOTSET``).

A manifest writes ``params: {NAME: VALUE}`` (a plain default, no schema: Airflow boxes such a
value into ``Param(VALUE)``) or ``params: {NAME: {default: V, description: D, schema: S}}``
(each key optional; a mapping as a plain default is written ``{default: {...}}``).
:func:`params_parse` reads both; the DAG-file loader writes the second.

A run's conf overrides each param it names; a name no param declares is kept (a plain value,
no schema). Every param must then have a value its schema accepts, in the DAG's order: the
first that fails raises :class:`~assets_app.exceptions.DagRunConfError` naming it, with
Airflow's text ("Invalid input for param x: …").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, validate
from jsonschema.exceptions import SchemaError, ValidationError

from assets_app.exceptions import DagRunConfError

_SPEC_KEYS = {"default", "description", "schema"}


class _NotSet:
    """A param without a default (Airflow's ``NOTSET``)."""

    def __repr__(self) -> str:
        return "NOTSET"


NOTSET: Any = _NotSet()


@dataclass(frozen=True)
class ParamSpec:
    name: str
    default: Any = NOTSET
    description: str | None = None
    schema: Mapping[str, Any] = field(default_factory=dict)

    @property
    def required(self) -> bool:
        """No default: a run's conf must give it."""
        return self.default is NOTSET


def _resolve(spec: ParamSpec, value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is set and valid under ``spec``'s schema."""
    if value is NOTSET:
        raise ValueError("No value passed and Param has no default value")
    try:
        validate(value, dict(spec.schema), format_checker=FormatChecker())
    except ValidationError as exc:
        raise ValueError(exc.message) from None


def params_parse(value: Any, where: str) -> tuple[ParamSpec, ...]:
    """The manifest's ``params`` of the DAG at ``where`` (see the module docstring);
    ``ValueError`` names the place (``where``, then the param) and what is wrong: a default
    that is not JSON, a schema that is not a valid JSON schema."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}.params: expected a mapping of param names to values or specs")
    specs = []
    for name, raw in value.items():
        place = f"{where}, param {name!r}"
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.params: names must be non-empty strings, got {name!r}")
        if isinstance(raw, Mapping):
            unknown = sorted(set(raw) - _SPEC_KEYS)
            if unknown:
                raise ValueError(
                    f"{place}: unknown key(s) {', '.join(map(str, unknown))} (a spec has "
                    "default, description and schema; write a mapping as a plain default "
                    "as {default: {...}})"
                )
            spec = ParamSpec(
                name=name,
                default=raw.get("default", NOTSET),
                description=raw.get("description"),
                schema=raw.get("schema") or {},
            )
        else:
            spec = ParamSpec(name=name, default=raw)
        _check_spec(spec, place)
        specs.append(spec)
    return tuple(specs)


def _check_spec(spec: ParamSpec, place: str) -> None:
    if spec.description is not None and not isinstance(spec.description, str):
        raise ValueError(f"{place}: description: expected a string")
    if not isinstance(spec.schema, Mapping):
        raise ValueError(f"{place}: schema: expected a JSON schema (a mapping)")
    try:
        json.dumps([spec.default if spec.default is not NOTSET else None, spec.schema])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{place}: not JSON: {exc}") from None
    try:
        Draft202012Validator.check_schema(dict(spec.schema))
    except SchemaError as exc:
        raise ValueError(f"{place}: schema: not a valid JSON schema: {exc.message}") from None


def params_check_defaults(specs: Sequence[ParamSpec], where: str) -> None:
    """A scheduled DAG's params must all resolve from their defaults (Airflow refuses such a
    DAG at parse time: its scheduled runs have no conf)."""
    for spec in specs:
        try:
            _resolve(spec, spec.default)
        except ValueError as exc:
            raise ValueError(
                f"{where}, param {spec.name!r}: a scheduled DAG's params need valid defaults "
                f"(its scheduled runs have no conf): {exc}"
            ) from None


def params_dump(specs: Sequence[ParamSpec]) -> list[list[Any]]:
    """The stored form (see the module docstring)."""
    dumped: list[list[Any]] = []
    for spec in specs:
        body: dict[str, Any] = {"description": spec.description, "schema": dict(spec.schema)}
        if spec.default is not NOTSET:
            body = {"default": spec.default, **body}
        dumped.append([spec.name, body])
    return dumped


def params_load(stored: Sequence[Any] | None) -> tuple[ParamSpec, ...]:
    """The stored form back as specs."""
    return tuple(
        ParamSpec(
            name=name,
            default=body.get("default", NOTSET),
            description=body.get("description"),
            schema=body.get("schema") or {},
        )
        for name, body in stored or ()
    )


def params_resolve(stored: Sequence[Any] | None, conf: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run's params: the DAG's defaults overridden by ``conf``, each checked against its
    schema in the DAG's order. Raises ``DagRunConfError`` naming the first param that fails
    (its ``param`` context field), with Airflow's message."""
    conf = conf or {}
    resolved: dict[str, Any] = {}
    for spec in params_load(stored):
        value = conf.get(spec.name, spec.default)
        try:
            _resolve(spec, value)
        except ValueError as exc:
            raise DagRunConfError(
                f"Invalid input for param {spec.name}: {exc}", param=spec.name
            ) from None
        resolved[spec.name] = value
    for name, value in conf.items():
        resolved.setdefault(name, value)
    return resolved
