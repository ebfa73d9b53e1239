"""Layers point down: the domain stores what Airflow's parser found in a DAG file
(``assets_app.services.dags.dag_files``) and starts nothing; the folder walk, the parser
subprocesses and their threads are the runtime's (``runtime.dag_processing``), and nothing in
``assets_app`` imports ``runtime``. Read from the source's import statements, so an import
that only some code path would run is caught too."""

from __future__ import annotations

import ast
from pathlib import Path

import assets_app
from assets_app.services.dags import dag_files

APP = Path(assets_app.__file__).resolve().parent
#: What starts or runs processes, threads or signal handlers.
PROCESS_MODULES = {"subprocess", "threading", "concurrent", "multiprocessing", "signal"}


def imported_modules(path: Path) -> set[str]:
    """The top-level package of every module ``path`` imports (relative ones resolved)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add("assets_app" if node.level else (node.module or "").split(".")[0])
    return names


def test_the_domain_half_of_dag_files_starts_no_process_or_thread():
    imported = imported_modules(Path(dag_files.__file__))

    assert "django" in imported  # the imports were read
    assert imported & (PROCESS_MODULES | {"runtime"}) == set()


def test_no_module_of_the_domain_imports_the_runtime():
    offenders = sorted(
        str(path.relative_to(APP.parent))
        for path in APP.rglob("*.py")
        if "runtime" in imported_modules(path)
    )

    assert offenders == []
