"""Issue 37, item 1: the contract of the DAG-file loader (``runtime/dag_contract.py``).

Every public attribute of the installed Airflow's ``DAG``, ``BaseOperator`` and
``MappedOperator`` has one row in ``CONTRACT`` and no row names an attribute Airflow does not
have (a new Airflow version fails here); ``docs/dag-files.md`` holds the table as the code
renders it; and real DAG files, parsed by the loader's own parser subprocess
(``runtime.dag_processing.dag_file_parse``, Airflow's ``DagBag``), are refused for each refused
attribute they set, naming the DAG, the task and the attribute, while files setting the
honoured and irrelevant ones load. Airflow runs only in subprocesses (``slow``), as the
loader runs it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.test import override_settings

from assets_app.services.dags.dag_files import ParsedFile
from runtime import dag_contract
from runtime.dag_contract import CONTRACT, Fate
from runtime.dag_processing import dag_file_parse
from tests.live_server import REPO

DOCS = REPO / "docs" / "dag-files.md"
needs_airflow = pytest.mark.skipif(
    importlib.util.find_spec("airflow.dag_processing") is None,
    reason="apache-airflow-core is not installed",
)

#: A refused attribute (not refused by the loader's own checks) -> how a DAG file sets it:
#: (the DAG's keyword arguments, the task's decorator with its arguments).
REFUSED_VALUES: dict[str, tuple[str, str]] = {
    "DAG.max_consecutive_failed_dag_runs": ("max_consecutive_failed_dag_runs=3", "task()"),
    "DAG.deadline": (
        "deadline=DeadlineAlert(reference=DeadlineReference.DAGRUN_QUEUED_AT, "
        "interval=timedelta(hours=1), callback=SyncCallback('builtins.print'))",
        "task()",
    ),
    "DAG.access_control": ("access_control={'Viewer': {'can_read'}}", "task()"),
    "DAG.fail_fast": ("fail_fast=True", "task()"),
    "DAG.allowed_run_types": ("allowed_run_types=['manual']", "task()"),
    "BaseOperator.start_date": ("", "task(start_date=datetime(2026, 2, 1, tzinfo=timezone.utc))"),
    "BaseOperator.end_date": ("", "task(end_date=datetime(2027, 1, 1, tzinfo=timezone.utc))"),
    "BaseOperator.wait_for_past_depends_before_skipping": (
        "",
        "task(depends_on_past=True, wait_for_past_depends_before_skipping=True)",
    ),
    "BaseOperator.resources": ("", "task(resources={'cpus': 2})"),
    "BaseOperator.run_as_user": ("", "task(run_as_user='nobody')"),
    "BaseOperator.executor": ("", "task(executor='LocalExecutor')"),
    "BaseOperator.executor_config": ("", "task(executor_config={'LocalExecutor': {'x': 1}})"),
    "BaseOperator.is_setup": ("", "setup"),
    "BaseOperator.is_teardown": ("", "teardown"),
    "BaseOperator.on_failure_fail_dagrun": ("", "teardown(on_failure_fail_dagrun=True)"),
}

DAG_FILE = """
from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, setup, task, teardown
from airflow.sdk.definitions.callback import SyncCallback
from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

with DAG(dag_id="{dag_id}", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
         {dag_kwargs}):

    @{decorator}
    def work():
        pass

    work()
"""

#: Honoured and irrelevant attributes, each given a value other than Airflow's default.
ALLOWED = """
from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, Label, Param, task
from airflow.sdk.definitions.retry_policy import RetryPolicy


def callback(context):
    pass


with DAG(
    dag_id="contract_allowed",
    description="a description",
    default_args={"owner": "data", "retries": 2, "email": ["ops@example.com"]},
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    end_date=datetime(2030, 1, 1, tzinfo=timezone.utc),
    template_searchpath=["/tmp"],
    user_defined_macros={"answer": 42},
    user_defined_filters={"twice": lambda v: v * 2},
    max_active_tasks=3,
    max_active_runs=2,
    dagrun_timeout=timedelta(hours=2),
    sla_miss_callback=None,
    catchup=False,
    on_success_callback=callback,
    on_failure_callback=callback,
    doc_md="# docs",
    params={"limit": Param(10, type="integer")},
    is_paused_upon_creation=False,
    jinja_environment_kwargs={"keep_trailing_newline": True},
    render_template_as_native_obj=True,
    tags=["contract"],
    owner_links={"data": "https://example.com"},
    dag_display_name="Contract",
    disable_bundle_versioning=True,
    rerun_with_latest_version=True,
):

    @task(
        retries=3,
        retry_delay=timedelta(seconds=5),
        retry_exponential_backoff=2.0,
        max_retry_delay=timedelta(minutes=1),
        retry_policy=None,
        depends_on_past=True,
        ignore_first_depends_on_past=False,
        wait_for_downstream=True,
        priority_weight=5,
        weight_rule="absolute",
        pool="default_pool",
        pool_slots=2,
        queue="reports",
        execution_timeout=timedelta(minutes=5),
        on_execute_callback=callback,
        on_failure_callback=callback,
        on_success_callback=callback,
        on_retry_callback=callback,
        on_skipped_callback=callback,
        email_on_failure=True,
        email_on_retry=False,
        max_active_tis_per_dag=1,
        max_active_tis_per_dagrun=1,
        do_xcom_push=False,
        multiple_outputs=True,
        doc_md="task docs",
        task_display_name="First",
        logger_name="contract",
        allow_nested_operators=False,
        map_index_template="{{ ti.task_id }}",
        trigger_rule="all_done",
    )
    def first():
        return {"a": 1}

    @task(params={"x": 1}, render_template_as_native_obj=False, owner="someone")
    def second():
        pass

    first() >> Label("then") >> second()
"""

DEFAULTS = """
from airflow.sdk import DAG, task

with DAG(dag_id="contract_defaults"):

    @task
    def only():
        pass

    only()
"""

MAPPED = """
from airflow.sdk import DAG, task

with DAG(dag_id="contract_mapped", schedule=None):

    @task
    def add(x):
        return x + 1

    add.partial().expand(x=[1, 2])
"""

MAPPED_FROM_TRIGGER = """
from datetime import timedelta

from airflow.sdk import DAG, BaseOperator
from airflow.triggers.base import StartTriggerArgs


class StartsInTriggerer(BaseOperator):
    start_from_trigger = True
    start_trigger_args = StartTriggerArgs(
        trigger_cls="airflow.providers.standard.triggers.temporal.TimeDeltaTrigger",
        trigger_kwargs={"delta": timedelta(seconds=1)},
        next_method="execute_complete",
        next_kwargs=None,
        timeout=None,
    )

    def __init__(self, *, part, **kwargs):
        super().__init__(**kwargs)
        self.part = part

    def execute_complete(self, context, event=None):
        pass


with DAG(dag_id="contract_mapped_from_trigger", schedule=None):
    StartsInTriggerer.partial(task_id="wait").expand(part=[1, 2])
"""

DEFERRABLE = """
from airflow.sdk import DAG, BaseOperator


class StartsInTriggerer(BaseOperator):
    start_from_trigger = True

    def execute(self, context):
        pass


with DAG(dag_id="contract_deferrable", schedule=None):
    StartsInTriggerer(task_id="wait")
"""


def _checked_refused() -> set[str]:
    return {
        key
        for key, attribute in CONTRACT.items()
        if attribute.fate == Fate.REFUSED and not attribute.by_loader
    }


def _dag_id(key: str) -> str:
    return "contract_" + key.replace(".", "_").lower()


# --- the table -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.sqlite  # Airflow's parser in processes: run once
@needs_airflow
def test_the_table_has_one_row_per_attribute_of_airflows_classes(tmp_path):
    # given the attributes of the installed Airflow's DAG, BaseOperator and MappedOperator,
    # listed in a Python with Airflow (as the loader's parser runs)
    listed = subprocess.run(
        [sys.executable, "-m", "runtime.dag_contract", "--airflow-attributes"],
        check=True,
        capture_output=True,
        cwd=REPO,
        env={"AIRFLOW_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    airflow = set(json.loads(listed.stdout))

    # then the table has a row for each, and none for an attribute Airflow does not have
    assert sorted(airflow - set(CONTRACT)) == [], "attributes of Airflow with no fate"
    assert sorted(set(CONTRACT) - airflow) == [], "rows for attributes Airflow does not have"


def test_every_row_says_what_is_done_or_why():
    for key, attribute in CONTRACT.items():
        assert key.split(".")[0] in ("DAG", "BaseOperator", "MappedOperator"), key
        assert attribute.text.strip(), key
        assert not attribute.by_loader or attribute.fate == Fate.REFUSED, key


def test_every_refused_row_has_a_dag_file_that_sets_it():
    assert set(REFUSED_VALUES) == _checked_refused()


def test_the_docs_page_holds_the_table_as_the_code_renders_it():
    # rewritten by: python -m runtime.dag_contract --update-docs docs/dag-files.md
    page = dag_contract.docs_section(DOCS.read_text(encoding="utf-8"))
    assert page == dag_contract.render_markdown()
    for key, attribute in CONTRACT.items():
        name = key.split(".")[1]
        assert f"| `{name}` | {attribute.fate.value} |" in page, key


def test_update_docs_writes_the_table_between_the_markers(tmp_path):
    # given a page with the markers and an old table
    page = tmp_path / "page.md"
    page.write_text(f"# Title\n\n{dag_contract.BEGIN}\nold\n{dag_contract.END}\n\nafter\n")

    # when it is updated, twice
    assert dag_contract.main(["--update-docs", str(page)]) == 0
    first = page.read_text()
    assert not dag_contract.docs_update(page)

    # then the table is between the markers, the rest unchanged
    assert dag_contract.docs_section(first) == dag_contract.render_markdown()
    assert first.startswith("# Title\n\n")
    assert first.endswith(f"{dag_contract.END}\n\nafter\n")
    assert page.read_text() == first


# --- real DAG files through the loader's parser -----------------------------------------------


@pytest.fixture(scope="module")
def parsed(tmp_path_factory) -> dict[str, ParsedFile]:
    """Every test file of this module parsed by the loader's parser subprocess, two at a time:
    one per refused attribute, and the allowed, default, mapped and deferrable ones."""
    if importlib.util.find_spec("airflow.dag_processing") is None:  # pragma: no cover
        pytest.skip("apache-airflow-core is not installed")
    folder = tmp_path_factory.mktemp("dags")
    sources = {
        key: DAG_FILE.format(dag_id=_dag_id(key), dag_kwargs=dag_kwargs, decorator=decorator)
        for key, (dag_kwargs, decorator) in REFUSED_VALUES.items()
    }
    sources |= {"allowed": ALLOWED, "defaults": DEFAULTS}
    sources |= {
        "mapped": MAPPED,
        "deferrable": DEFERRABLE,
        "mapped_from_trigger": MAPPED_FROM_TRIGGER,
    }
    paths = {}
    for name, source in sources.items():
        paths[name] = folder / f"{name.replace('.', '_').lower()}.py"
        paths[name].write_text(textwrap.dedent(source))
    home = tmp_path_factory.mktemp("parser_home")
    with (
        override_settings(DAG_PARSER_HOME=home, DAG_PARSER_PYTHON=sys.executable),
        ThreadPoolExecutor(2) as pool,
    ):
        return dict(
            zip(
                paths,
                pool.map(lambda path: dag_file_parse(path=path, folder=folder), paths.values()),
                strict=True,
            )
        )


@pytest.mark.slow
@pytest.mark.sqlite  # Airflow's parser in processes: run once
@pytest.mark.timeout(600)
@pytest.mark.parametrize("key", sorted(REFUSED_VALUES))
def test_a_refused_attribute_set_in_a_dag_file_is_refused_at_load(key, parsed):
    # given a DAG file setting the attribute to a value other than Airflow's default
    result = parsed[key]
    kind, name = key.split(".")

    # then the file declares no DAG, and its import error names the DAG, the task and the
    # attribute with the table's reason
    assert result.entries == [], result.errors
    where = f"DAG {_dag_id(key)!r}" + (", task 'work'" if kind == "BaseOperator" else "")
    message = f"{where}, attribute {name!r}: {CONTRACT[key].text}"
    assert any(message in error.splitlines() for error in result.errors), result.errors


@pytest.mark.slow
@pytest.mark.sqlite  # Airflow's parser in processes: run once
@pytest.mark.timeout(600)
def test_honoured_and_irrelevant_attributes_load(parsed):
    # given a DAG file giving honoured and irrelevant attributes values other than their
    # defaults, and one with every default
    for name in ("allowed", "defaults"):
        result = parsed[name]

        # then each loads, its DAG declared
        assert result.errors == [], (name, result.errors)
        assert [entry["dag_id"] for entry in result.entries] == [f"contract_{name}"]
    # the queue is kept for EXECUTOR=celery
    tasks = {task["task_id"]: task for task in parsed["allowed"].entries[0]["tasks"]}
    assert (tasks["first"]["queue"], tasks["second"]["queue"]) == ("reports", "default")


@pytest.mark.slow
@pytest.mark.sqlite  # Airflow's parser in processes: run once
@pytest.mark.timeout(600)
def test_the_loaders_own_refusals_cover_the_rows_refused_by_the_loader(parsed):
    # a mapped task loads (its partial arguments held to BaseOperator's rows, its expansion
    # stored); only start_from_trigger on a mapped task is refused by the loader's own check
    by_loader = {key for key, attribute in CONTRACT.items() if attribute.by_loader}
    assert by_loader == {"MappedOperator.start_from_trigger"}
    mapped, deferrable = parsed["mapped"], parsed["deferrable"]
    assert mapped.errors == []
    (entry,) = mapped.entries
    (add,) = entry["tasks"]
    assert (entry["dag_id"], add["task_id"], add["mapped"]) == (
        "contract_mapped",
        "add",
        {"length": 2, "group": None},
    )
    # start_from_trigger without start_trigger_args starts on a worker, as in Airflow
    assert deferrable.errors == []
    assert [entry["dag_id"] for entry in deferrable.entries] == ["contract_deferrable"]
    assert "start_trigger_args" not in deferrable.entries[0]["tasks"][0]
    assert parsed["mapped_from_trigger"].entries == []
    assert parsed["mapped_from_trigger"].errors == [
        "DAG 'contract_mapped_from_trigger', task 'wait': start_from_trigger on a mapped task "
        "is not supported by the registry (each map index would start in the triggerer)"
    ]
