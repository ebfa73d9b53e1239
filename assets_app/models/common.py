"""What the tables of every subdomain share: the lengths of Airflow's id columns and the
composite-key constraint of an association table (see ``assets_app.models``)."""

from __future__ import annotations

from django.db import models

NAME_LENGTH = 1500  # asset/alias names, uris and groups
ID_LENGTH = 250  # dag, task and run ids
PARTITION_KEY_LENGTH = 250


def composite_key(*fields: str, name: str) -> list[models.BaseConstraint]:
    """The constraints of an association table: Airflow's composite key over ``fields``, kept
    unique beside the surrogate ``id`` (see the module's docstring)."""
    return [models.UniqueConstraint(fields=[*fields], name=name)]
