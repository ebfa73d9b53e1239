"""factory-boy factories for the data model."""

from __future__ import annotations

import factory
from factory.django import DjangoModelFactory

from assets_app import models


class AssetFactory(DjangoModelFactory[models.Asset]):
    class Meta:
        model = models.Asset
        django_get_or_create = ("name", "uri")

    name = factory.Sequence(lambda n: f"asset_{n}")
    uri = factory.LazyAttribute(lambda o: f"s3://bucket/{o.name}")


class AssetAliasFactory(DjangoModelFactory[models.AssetAlias]):
    class Meta:
        model = models.AssetAlias
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"alias_{n}")


class AssetEventFactory(DjangoModelFactory[models.AssetEvent]):
    class Meta:
        model = models.AssetEvent

    asset = factory.SubFactory(AssetFactory)
    source_dag_id = "dag"
    source_task_id = "task"
    source_run_id = "run"


class DagFactory(DjangoModelFactory[models.Dag]):
    class Meta:
        model = models.Dag
        django_get_or_create = ("dag_id",)

    dag_id = factory.Sequence(lambda n: f"dag_{n}")


class DagRunFactory(DjangoModelFactory[models.DagRun]):
    class Meta:
        model = models.DagRun

    dag = factory.SubFactory(DagFactory)
    run_id = factory.Sequence(lambda n: f"manual__run_{n}")


class TaskInstanceFactory(DjangoModelFactory[models.TaskInstance]):
    class Meta:
        model = models.TaskInstance

    dag_run = factory.SubFactory(DagRunFactory)
    dag_id = factory.LazyAttribute(lambda o: o.dag_run.dag_id)
    run_id = factory.LazyAttribute(lambda o: o.dag_run.run_id)
    task_id = factory.Sequence(lambda n: f"task_{n}")
    state = models.TaskInstanceState.QUEUED
