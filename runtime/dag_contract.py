"""The contract of the DAG-file loader: every public attribute of Airflow's ``DAG``,
``BaseOperator`` and ``MappedOperator`` with its fate in the registry (issue 37, item 1).

:data:`CONTRACT` is the one table. Each attribute is

- **honoured**: the registry does what Airflow does with it (the text says where: the loader
  stores it, the scheduler or the worker's claim enforces it, or Airflow's own task runner,
  which runs every task of a DAG file, applies it from the file);
- **refused**: a DAG file giving it a value other than Airflow's default is refused at load,
  an import error ``DAG 'x', task 'y', attribute 'z': <reason>`` (:func:`refusals`, called by
  ``runtime/dag_parse.py``); the rows marked ``by_loader`` are refused by the loader's own,
  older check, whose message names the feature instead (dynamic task mapping);
- **irrelevant here**: it changes nothing a run does under Airflow either (what its UI shows,
  or a feature Airflow 3 itself dropped), with the reason.

:func:`airflow_attributes` lists Airflow's attributes from the installed classes, so a new
Airflow version with a new attribute fails ``tests/runtime/test_dag_contract.py`` until it is
given a fate here. :func:`render_markdown` renders the table for ``docs/dag-files.md``::

    python -m runtime.dag_contract --update-docs docs/dag-files.md

Standalone like ``dag_parse``: the table imports nothing, and Airflow is imported only by the
functions that read its classes, in the parser's interpreter.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class Fate(enum.StrEnum):
    HONOURED = "honoured"
    REFUSED = "refused"
    IRRELEVANT = "irrelevant here"


@dataclass(frozen=True)
class Attribute:
    """One attribute's fate and, in words, what the registry does with it (honoured), why it
    is refused, or why it does not matter here."""

    fate: Fate
    text: str
    #: refused by the loader's own check (``dag_parse``), not by :func:`refusals`
    by_loader: bool = False


def _h(text: str) -> Attribute:
    return Attribute(Fate.HONOURED, text)


def _r(text: str, *, by_loader: bool = False) -> Attribute:
    return Attribute(Fate.REFUSED, text, by_loader=by_loader)


def _i(text: str) -> Attribute:
    return Attribute(Fate.IRRELEVANT, text)


_RUNNER = "applied by Airflow's task runner, which runs the task from the DAG file"
_UI = "shown by Airflow's UI only; the registry does not store it"
_EXPANSION = (
    "expanded by the scheduler into one task instance per element once the values it maps over "
    "are known: literals, an upstream's XCom (list or dict), .map/.zip/.concat, the cross "
    "product of .expand's arguments, .expand_kwargs, mapped task groups; zero elements skip "
    "it, more than [core] max_map_length fail the upstream that pushed them"
)
_SETUP_TEARDOWN = (
    "setup and teardown tasks (as_setup/as_teardown, @setup/@teardown) are not supported by the "
    "registry: its scheduler does not run a teardown after a failure, nor leave teardowns out "
    "of a run's state, nor clear setups with their tasks"
)
_CALLBACK = (
    "run by Airflow's task runner in the task's process (the registry answers should_retry, "
    "so a failed try calls on_retry_callback or on_failure_callback as under Airflow)"
)
_PROCESSOR_CALLBACK = (
    f"{_CALLBACK}; a try that ends outside its process (heartbeat or queued timeout, its "
    "trigger's failure event) has it run by manage.py dag_processor in the DAG file's code, "
    "as Airflow's DAG processor runs a TaskCallbackRequest"
)
_RETRY_DELAY = "the delay before a retry (issue 37: Airflow's formula)"

#: Every public attribute of Airflow's DAG, BaseOperator and MappedOperator, by
#: ``Class.attribute``: what happens to it in the registry. ``.partial(**kwargs)`` takes
#: BaseOperator's arguments (Airflow checks them against the operator's ``__init__``), held
#: to the same rows.
CONTRACT: dict[str, Attribute] = {
    # --- DAG ---------------------------------------------------------------------------------
    "DAG.dag_id": _h("the DAG's id"),
    "DAG.description": _i(_UI),
    "DAG.default_args": _h(
        "applied by Airflow's parser to every task; the tasks' resulting attributes are held to "
        "this table"
    ),
    "DAG.start_date": _h("the first logical date the scheduler considers"),
    "DAG.end_date": _h("no run is scheduled after it"),
    "DAG.schedule": _h(
        "cron strings and presets, timedelta, @once, asset conditions, AssetOrTimeSchedule; "
        "other timetables are refused at load by the loader; the scheduled assets' watchers "
        "(AssetWatcher, AIP-82) run in the triggerer while the DAG is unpaused (a watcher "
        "whose trigger is not a BaseEventTrigger is refused at load by the loader)"
    ),
    "DAG.template_searchpath": _h(_RUNNER),
    "DAG.template_undefined": _h(_RUNNER),
    "DAG.user_defined_macros": _h(_RUNNER),
    "DAG.user_defined_filters": _h(_RUNNER),
    "DAG.max_active_tasks": _h("the task instances of a run running at once (the worker's claim)"),
    "DAG.max_active_runs": _h("the runs running at once (admission of queued runs)"),
    "DAG.max_consecutive_failed_dag_runs": _r(
        "pausing a DAG after consecutive failed runs is not supported by the registry"
    ),
    "DAG.dagrun_timeout": _h("a run running longer fails, its unfinished tasks skipped"),
    "DAG.deadline": _r("deadline alerts are not supported by the registry"),
    "DAG.sla_miss_callback": _i("SLAs were removed in Airflow 3.0; Airflow ignores it too"),
    "DAG.catchup": _h("the scheduler creates the missed runs since start_date"),
    "DAG.on_success_callback": _h(
        "run once when a run succeeds, in a process with the DAG file's code"
    ),
    "DAG.on_failure_callback": _h(
        "run once when a run fails, in a process with the DAG file's code"
    ),
    "DAG.doc_md": _i(_UI),
    "DAG.params": _h("stored with the DAG; a trigger's conf is checked against them"),
    "DAG.access_control": _r(
        "per-DAG role permissions are not enforced by the registry (its users are Django's)"
    ),
    "DAG.is_paused_upon_creation": _h("a new DAG's pause"),
    "DAG.jinja_environment_kwargs": _h(_RUNNER),
    "DAG.render_template_as_native_obj": _h(_RUNNER),
    "DAG.tags": _h("stored with the DAG, filters in the APIs"),
    "DAG.owner_links": _i(_UI),
    "DAG.auto_register": _h("Airflow's parser collects the DAGs of `with DAG(...)` blocks"),
    "DAG.fail_fast": _r(
        "failing the other running tasks when one fails (fail_fast) is not supported by the "
        "registry"
    ),
    "DAG.allowed_run_types": _r("restricting a DAG's run types is not supported by the registry"),
    "DAG.dag_display_name": _i(_UI),
    "DAG.task_group": _h(
        "task groups prefix their tasks' ids (group.task) as under Airflow; a mapped task "
        "group's tasks expand together and depend on each other per map index"
    ),
    "DAG.disable_bundle_versioning": _i(
        "the registry keeps no bundle versions: a run always runs the DAG file as it is now"
    ),
    "DAG.rerun_with_latest_version": _i(
        "the registry keeps no bundle versions: a cleared task runs the DAG file as it is now"
    ),
    "DAG.timezone": _h("the timezone the DAG's cron schedule is read in"),
    "DAG.timetable": _h("the schedule, as above"),
    "DAG.task_dict": _h("the DAG's tasks"),
    "DAG.fileloc": _h("the DAG file every task's worker runs"),
    "DAG.relative_fileloc": _i("the registry records the absolute path (fileloc)"),
    "DAG.partial": _i("set by Airflow for a partial DAG (a task subset); never in a DAG file"),
    "DAG.edge_info": _i("edge labels (Label) are shown by Airflow's UI only"),
    "DAG.has_on_success_callback": _h("follows on_success_callback"),
    "DAG.has_on_failure_callback": _h("follows on_failure_callback"),
    "DAG.last_loaded": _i("the registry records its own parse time (last_parsed_time)"),
    # --- BaseOperator ------------------------------------------------------------------------
    "BaseOperator.task_id": _h("the task's id"),
    "BaseOperator.owner": _h("the task's owner, and its DAG's owners, on /api/v2"),
    "BaseOperator.email": _h("where email_on_failure and email_on_retry send (Django's email)"),
    "BaseOperator.email_on_retry": _h("an email when a try fails and will be retried"),
    "BaseOperator.email_on_failure": _h("an email when the task fails"),
    "BaseOperator.retries": _h("the task instance's max_tries"),
    "BaseOperator.retry_delay": _h(_RETRY_DELAY),
    "BaseOperator.retry_exponential_backoff": _h(_RETRY_DELAY),
    "BaseOperator.max_retry_delay": _h(_RETRY_DELAY),
    "BaseOperator.retry_policy": _h(
        "evaluated by Airflow's task runner; the registry takes the retry delay or the failure "
        "it reports"
    ),
    "BaseOperator.start_date": _r(
        "a task start_date other than its DAG's is not supported by the registry (every run "
        "has every task)"
    ),
    "BaseOperator.end_date": _r(
        "a task end_date other than its DAG's is not supported by the registry (every run has "
        "every task)"
    ),
    "BaseOperator.depends_on_past": _h("waits for the same task in the previous run"),
    "BaseOperator.ignore_first_depends_on_past": _h("as under Airflow, with depends_on_past"),
    "BaseOperator.wait_for_past_depends_before_skipping": _r(
        "waiting for the past before skipping is not supported by the registry"
    ),
    "BaseOperator.wait_for_downstream": _h("waits for the previous run's direct downstreams"),
    "BaseOperator.dag": _h("the task's DAG"),
    "BaseOperator.params": _h(_RUNNER + " (merged over the DAG's params)"),
    "BaseOperator.default_args": _h("applied by Airflow's parser to the task"),
    "BaseOperator.priority_weight": _h("what the worker claims first, with weight_rule"),
    "BaseOperator.weight_rule": _h("downstream, upstream or absolute, as under Airflow"),
    "BaseOperator.queue": _h(
        "the Celery queue its task instances are sent to with EXECUTOR=celery "
        "(docs/deployment.md); the local worker takes every queue"
    ),
    "BaseOperator.pool": _h("the pool whose slots the task takes (the worker's claim)"),
    "BaseOperator.pool_slots": _h("the slots of its pool the task takes"),
    "BaseOperator.sla": _i("SLAs were removed in Airflow 3.0; Airflow ignores it too"),
    "BaseOperator.execution_timeout": _h("enforced by Airflow's task runner"),
    "BaseOperator.on_execute_callback": _h(_CALLBACK),
    "BaseOperator.on_failure_callback": _h(_PROCESSOR_CALLBACK),
    "BaseOperator.on_success_callback": _h(_CALLBACK),
    "BaseOperator.on_retry_callback": _h(_PROCESSOR_CALLBACK),
    "BaseOperator.on_skipped_callback": _h(_CALLBACK),
    "BaseOperator.pre_execute": _h(_RUNNER),
    "BaseOperator.post_execute": _h(_RUNNER),
    "BaseOperator.trigger_rule": _h("every trigger rule, as under Airflow"),
    "BaseOperator.resources": _r(
        "resource requests are not supported by the registry (no executor reads them)"
    ),
    "BaseOperator.run_as_user": _r(
        "impersonation is not supported by the registry (tasks run as the worker's user)"
    ),
    "BaseOperator.map_index_template": _h(
        "rendered by Airflow's task runner; the label shows in the admin and /api/v2"
    ),
    "BaseOperator.max_active_tis_per_dag": _h("the task's instances running at once, all runs"),
    "BaseOperator.max_active_tis_per_dagrun": _h("the task's instances running at once, per run"),
    "BaseOperator.executor": _r(
        "choosing an executor is not supported by the registry (its worker runs every task)"
    ),
    "BaseOperator.executor_config": _r(
        "executor settings are not supported by the registry (no executor reads them)"
    ),
    "BaseOperator.do_xcom_push": _h(_RUNNER),
    "BaseOperator.multiple_outputs": _h(_RUNNER),
    "BaseOperator.inlets": _h("assets, aliases and Asset.ref; anything else is refused at load"),
    "BaseOperator.outlets": _h("assets, aliases and Asset.ref; anything else is refused at load"),
    "BaseOperator.task_group": _h("the group prefixes the task's id, as under Airflow"),
    "BaseOperator.doc": _i(_UI),
    "BaseOperator.doc_md": _i(_UI),
    "BaseOperator.doc_json": _i(_UI),
    "BaseOperator.doc_yaml": _i(_UI),
    "BaseOperator.doc_rst": _i(_UI),
    "BaseOperator.task_display_name": _i(_UI),
    "BaseOperator.logger_name": _h(_RUNNER),
    "BaseOperator.allow_nested_operators": _h(_RUNNER),
    "BaseOperator.render_template_as_native_obj": _h(_RUNNER),
    "BaseOperator.downstream_task_ids": _h("the DAG's edges"),
    "BaseOperator.has_on_execute_callback": _h("follows on_execute_callback"),
    "BaseOperator.has_on_failure_callback": _h("follows on_failure_callback"),
    "BaseOperator.has_on_retry_callback": _h("follows on_retry_callback"),
    "BaseOperator.has_on_skipped_callback": _h("follows on_skipped_callback"),
    "BaseOperator.has_on_success_callback": _h("follows on_success_callback"),
    "BaseOperator.has_retry_policy": _h("follows retry_policy"),
    "BaseOperator.is_setup": _r(_SETUP_TEARDOWN),
    "BaseOperator.is_teardown": _r(_SETUP_TEARDOWN),
    "BaseOperator.on_failure_fail_dagrun": _r(_SETUP_TEARDOWN),
    "BaseOperator.start_from_trigger": _h(
        "the task starts in the triggerer, deferred with its start_trigger_args, and a worker "
        "runs its next method (docs/triggerer.md); templated trigger kwargs are refused by the "
        "loader"
    ),
    "BaseOperator.start_trigger_args": _h(
        "the trigger a start_from_trigger task starts with, stored with the task"
    ),
    "BaseOperator.task_type": _i("the operator's class name, shown by Airflow's UI"),
    "BaseOperator.template_ext": _h(_RUNNER),
    "BaseOperator.template_fields": _h(_RUNNER),
    "BaseOperator.template_fields_renderers": _i(_UI),
    "BaseOperator.ui_color": _i(_UI),
    "BaseOperator.ui_fgcolor": _i(_UI),
    # --- MappedOperator -------------------------------------------------------------------------
    "MappedOperator.operator_class": _h("the operator each map index runs, " + _RUNNER),
    "MappedOperator.expand_input": _h(_EXPANSION),
    "MappedOperator.partial_kwargs": _h(
        "the operator's other arguments: each is held to BaseOperator's row of this table"
    ),
    "MappedOperator.task_id": _h("the task's id; its instances are task_id[map_index]"),
    "MappedOperator.params": _h("the DAG's params with the task's own, as for any task"),
    "MappedOperator.operator_extra_links": _i(_UI),
    "MappedOperator.template_ext": _h(_RUNNER),
    "MappedOperator.template_fields": _h(_RUNNER),
    "MappedOperator.template_fields_renderers": _i(_UI),
    "MappedOperator.ui_color": _i(_UI),
    "MappedOperator.ui_fgcolor": _i(_UI),
    "MappedOperator.task_type": _i("the operator's class name, shown by Airflow's UI"),
    "MappedOperator.start_trigger_args": _i("read only with start_from_trigger"),
    "MappedOperator.start_from_trigger": _r(
        "start_from_trigger on a mapped task is refused at load by the loader (each map index "
        "would start in the triggerer)",
        by_loader=True,
    ),
    "MappedOperator.returns_dag_result": _h(_RUNNER),
    "MappedOperator.dag": _h("the DAG the task belongs to"),
    "MappedOperator.task_group": _h(
        "the group prefixes the task's id; a mapped task group's tasks depend on each other "
        "per map index"
    ),
    "MappedOperator.start_date": _h("as BaseOperator.start_date"),
    "MappedOperator.end_date": _h("as BaseOperator.end_date"),
    "MappedOperator.upstream_task_ids": _h("the DAG's edges"),
    "MappedOperator.downstream_task_ids": _h("the DAG's edges"),
}


# --- Airflow's classes ------------------------------------------------------------------------


def airflow_attributes() -> set[str]:
    """Every public attribute of the installed Airflow's ``DAG`` (its attrs fields),
    ``BaseOperator`` (its ``__init__`` arguments and the fields Airflow serializes for the
    scheduler) and ``MappedOperator`` (its attrs fields), as :data:`CONTRACT`'s keys."""
    import attrs
    from airflow.sdk import DAG, BaseOperator
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    def public(names: Any) -> set[str]:
        return {name for name in names if not name.startswith("_")}

    init = inspect.signature(BaseOperator.__init__).parameters
    serialized = BaseOperator.get_serialized_fields()  # type: ignore[no-untyped-call]
    task = public(init) - {"self", "kwargs"} | public(serialized)
    mapped = public(f.name for f in attrs.fields(MappedOperator))
    return (
        {f"DAG.{name}" for name in public(f.name for f in attrs.fields(DAG))}
        | {f"BaseOperator.{name}" for name in task}
        | {f"MappedOperator.{name}" for name in mapped}
    )


class _Reference:
    """Airflow's defaults: a DAG and an operator made with no argument but their ids."""

    def __init__(self, dag: Any) -> None:
        from airflow.sdk import DAG, BaseOperator

        class Reference(BaseOperator):
            pass

        self.dag = DAG(dag_id=dag.dag_id, auto_register=False)
        self.task = Reference(task_id="contract_reference")

    def task_default(self, dag: Any, task: Any, name: str) -> Any:
        """BaseOperator's default, which an operator's own default does not change: a task
        whose class picks a queue or an executor for it is refused as one that names it."""
        if name in ("start_date", "end_date"):  # a task inherits its DAG's dates
            return getattr(dag, name)
        return getattr(self.task, name, None)


def _same(value: Any, default: Any) -> bool:
    if not value and not default:  # None, {}, [] and False are one "not given"
        return True
    try:
        return bool(value == default)
    except Exception:  # a value that cannot be compared is not the default
        return False


def refusals(dag: Any) -> list[str]:
    """The refusal messages for a DAG Airflow parsed: one per refused attribute (not refused
    by the loader's own checks) whose value differs from Airflow's default, naming the DAG,
    the task and the attribute; a mapped task's attributes are its ``.partial`` arguments."""
    reference = _Reference(dag)
    messages = []
    for key, attribute in CONTRACT.items():
        kind, name = key.split(".")
        if attribute.fate != Fate.REFUSED or attribute.by_loader or kind != "DAG":
            continue
        if not _same(getattr(dag, name, None), getattr(reference.dag, name, None)):
            messages.append(f"DAG {dag.dag_id!r}, attribute {name!r}: {attribute.text}")
    for task in dag.task_dict.values():
        for key, attribute in CONTRACT.items():
            kind, name = key.split(".")
            if attribute.fate != Fate.REFUSED or attribute.by_loader or kind != "BaseOperator":
                continue
            default = reference.task_default(dag, task, name)
            if not _same(getattr(task, name, None), default):
                messages.append(
                    f"DAG {dag.dag_id!r}, task {task.task_id!r}, attribute {name!r}: "
                    f"{attribute.text}"
                )
    return messages


# --- the table in the docs --------------------------------------------------------------------

BEGIN = "<!-- BEGIN dag_contract: generated by `python -m runtime.dag_contract --update-docs` -->"
END = "<!-- END dag_contract -->"
_TITLES = {
    "DAG": "`DAG` (and `@dag`)",
    "BaseOperator": "`BaseOperator` (every operator, `@task`, and `.partial()`'s arguments)",
    "MappedOperator": "`MappedOperator` (`.expand()`, `.expand_kwargs()`)",
}


def render_markdown() -> str:
    """The table as Markdown: per class, one row per attribute with its fate and text."""
    counts = {fate: sum(a.fate == fate for a in CONTRACT.values()) for fate in Fate}
    by_loader = sum(a.by_loader for a in CONTRACT.values())
    lines = [
        f"{len(CONTRACT)} attributes: "
        + ", ".join(f"{counts[fate]} {fate.value}" for fate in Fate)
        + f" ({by_loader} of the refused ones by the loader's own check: start_from_trigger on a "
        "mapped task).",
    ]
    for kind, title in _TITLES.items():
        lines += ["", f"#### {title}", "", "| Attribute | Fate | What the registry does, or why |"]
        lines.append("|---|---|---|")
        for key, attribute in CONTRACT.items():
            owner, name = key.split(".")
            if owner == kind:
                text = attribute.text.replace("|", "\\|")
                lines.append(f"| `{name}` | {attribute.fate.value} | {text} |")
    return "\n".join(lines) + "\n"


def docs_section(text: str) -> str:
    """What a page holds between the markers (raises ``ValueError`` without them)."""
    start = text.index(BEGIN) + len(BEGIN)
    return text[start : text.index(END, start)].strip("\n") + "\n"


def docs_update(path: Path) -> bool:
    """Write :func:`render_markdown` between the markers of ``path``; whether it changed."""
    text = path.read_text(encoding="utf-8")
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    new = text[:start] + "\n" + render_markdown() + text[end:]
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update-docs", type=Path, help="the page to write the table into")
    parser.add_argument(
        "--airflow-attributes",
        action="store_true",
        help="print the installed Airflow's attributes (JSON) instead",
    )
    args = parser.parse_args(argv)
    if args.airflow_attributes:
        sys.stdout.write(json.dumps(sorted(airflow_attributes())) + "\n")
    elif args.update_docs is None:
        sys.stdout.write(render_markdown())
    elif docs_update(args.update_docs):
        sys.stdout.write(f"{args.update_docs}: the table was updated\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
