"""The finished states have one home (``assets_app.models.runs``), held to Airflow 3.3's
``State`` (the installed ``apache-airflow-core``); every other list of them derives from it."""

from __future__ import annotations

from airflow.api_fastapi.execution_api.datamodels.taskinstance import TerminalStateNonSuccess
from airflow.utils.state import State

from assets_app.models import FAILED_TI_STATES, FINISHED_RUN_STATES, FINISHED_TI_STATES
from executionapi.serializers.task_instances import TERMINAL_PAYLOAD_STATES


def values(states):
    return {str(state.value) for state in states}


def test_the_finished_task_instance_states_are_airflows():
    assert values(FINISHED_TI_STATES) == values(State.finished)


def test_the_failed_task_instance_states_are_airflows():
    assert values(FAILED_TI_STATES) == values(State.failed_states)


def test_the_finished_run_states_are_airflows():
    assert values(FINISHED_RUN_STATES) == values(State.finished_dr_states)


def test_the_terminal_state_payload_takes_every_finished_state_but_success():
    # the execution API's TITerminalStatePayload, in its schema's order
    assert TERMINAL_PAYLOAD_STATES == ["failed", "skipped", "removed", "upstream_failed"]
    assert set(TERMINAL_PAYLOAD_STATES) == values(TerminalStateNonSuccess)
