"""The JSON bodies ``/api/v2/``'s writes take, as Airflow 3.3's datamodels
(``airflow/api_fastapi/core_api/datamodels``) declare them; read by
``publicapi.params.body_parse`` (a bad body is FastAPI's 422). Variables and connections keep
theirs in ``publicapi.secrets``."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Field, model_validator

from assets_app.models import PARTITION_KEY_LENGTH
from publicapi.params import Body, BodyDatetime, Note, Text


class CreateEventBody(Body):
    """Airflow's ``CreateAssetEventsBody`` (``asset_id``), or the asset by ``name``/``uri``."""

    asset_id: int | None = None
    name: Text | None = None
    uri: Text | None = None
    partition_key: Text | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    #: Airflow's multi-team consumers; the registry has no teams, every consumer is global
    access_control: dict[str, Any] | None = None


class DagPatchBody(Body):
    is_paused: bool


class TriggerBody(Body):
    """Airflow's ``TriggerDAGRunPostBody``: the ``note`` is the new run's, as Airflow keeps it;
    a data interval is both ends or none (Airflow's ``check_data_intervals``)."""

    dag_run_id: Text | None = None
    logical_date: BodyDatetime
    data_interval_start: BodyDatetime = None
    data_interval_end: BodyDatetime = None
    run_after: BodyDatetime = None
    conf: dict[str, Any] | None = None
    note: Note | None = None
    partition_key: Annotated[Text, Field(max_length=PARTITION_KEY_LENGTH)] | None = None

    @model_validator(mode="after")
    def check_data_intervals(self) -> Self:
        if (self.data_interval_start is None) != (self.data_interval_end is None):
            raise ValueError(
                "Either both data_interval_start and data_interval_end must be provided or "
                "both must be None"
            )
        return self


class MaterializeBody(TriggerBody):
    """Airflow's ``MaterializeAssetBody``: the trigger body, the logical date optional."""

    logical_date: BodyDatetime = None


class DagRunPatchBody(Body):
    """Airflow's ``DAGRunPatchBody``."""

    state: Literal["queued", "success", "failed"] | None = None
    note: Note | None = None


class TaskInstancePatchBody(Body):
    """Airflow's ``PatchTaskInstanceBody``: mark a task instance (the registry keeps no
    task-instance notes and marks no relatives: ``note`` and the ``include_*`` flags are
    refused with a 400 naming them)."""

    new_state: Literal["success", "failed", "skipped"] | None = None
    note: Note | None = None
    include_upstream: bool = False
    include_downstream: bool = False
    include_future: bool = False
    include_past: bool = False


class DagRunClearBody(Body):
    dry_run: bool = True
    only_failed: bool = False
    only_new: bool = False
    run_on_latest_version: bool | None = None
    note: Note | None = None
