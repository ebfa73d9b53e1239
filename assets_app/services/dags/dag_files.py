"""Storing what Airflow's parser found in one DAG file: the domain half of the DAG processor.

The process half — walking a folder, running Airflow's parser in subprocesses, watching files
between passes — is :mod:`runtime.dag_processing`; it hands each file here as a
:class:`ParsedFile` (data only: the file, its DAGs as manifest entries, its errors), and
:func:`dag_file_store` stores it with ``dags_declare`` — one transaction per file:

- a file that imports and whose DAGs the registry can run: its DAGs are declared (with
  ``airflow_dag_file`` set, so the worker runs the file), its ``import_error`` row goes; when
  nothing would change (``dags_unchanged``) nothing is written at all;
- a file that fails to import, times out, or holds a DAG the registry refuses (dynamic task
  mapping, watchers, partitions, ...): one ``import_error`` row with the traceback or the
  refusals; the file's DAGs keep their last good version. The same error again writes nothing;
- a file gone from the folder: its DAGs go stale (:func:`dag_folder_forget_missing`) and its
  ``import_error`` row goes.

Side effects (logging) run after commit.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from assets_app.exceptions import ManifestError
from assets_app.models import Dag, DagImportError
from assets_app.services.dags.code import dag_code_store
from assets_app.services.dags.declare import dags_declare, dags_unchanged
from assets_app.services.dags.manifest import Manifest, manifest_parse

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParsedFile:
    """What the parser found in one file: its DAGs as manifest entries, or its errors."""

    path: Path
    entries: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: the file's text as it was parsed ("" if it could not be read): kept as its DAG code
    source: str = ""


class FileOutcome(StrEnum):
    DECLARED = "declared"  # its DAGs were stored
    UNCHANGED = "unchanged"  # what it declares is what is stored: nothing written
    IMPORT_ERROR = "import_error"  # recorded (or updated) as an import error
    IMPORT_ERROR_UNCHANGED = "import_error_unchanged"  # the same import error as stored
    STALE = "stale"  # the file is gone: its DAGs were marked stale


@dataclass(frozen=True)
class FileResult:
    path: str
    outcome: FileOutcome
    dag_ids: list[str] = field(default_factory=list)
    stale_dag_ids: list[str] = field(default_factory=list)
    error: str = ""
    warnings: list[str] = field(default_factory=list)


def _manifest(parsed: ParsedFile, folder: Path) -> Manifest:
    """The parsed entries as a manifest; DAGs new to the registry get Airflow's pause on
    creation (``DAGS_ARE_PAUSED_AT_CREATION`` unless the DAG sets ``is_paused_upon_creation``),
    and the folder is their ``airflow_dags_folder`` (a file in a subfolder imports from the
    folder's top, as under Airflow)."""
    entries = [
        {
            **entry,
            "airflow_dags_folder": str(folder),
            "is_paused_upon_creation": entry.get(
                "is_paused_upon_creation", settings.DAGS_ARE_PAUSED_AT_CREATION
            ),
        }
        for entry in parsed.entries
    ]
    return manifest_parse({"dags": entries}, source=parsed.path.name, base_dir=folder)


@transaction.atomic
def dag_file_store(*, parsed: ParsedFile, folder: Path) -> FileResult:
    """Store what one file declares, or its import error (see the module docstring)."""
    fileloc = str(parsed.path)
    error = "\n\n".join(parsed.errors)
    manifest = None
    if not error:
        try:
            manifest = _manifest(parsed, folder)
        except ManifestError as exc:
            error = f"{exc}"
    if manifest is not None:
        known_error = DagImportError.objects.filter(filename=fileloc).exists()
        if parsed.source:
            dag_code_store(fileloc=fileloc, source=parsed.source)
        if not known_error and dags_unchanged(manifest=manifest, fileloc=fileloc):
            return FileResult(
                path=fileloc,
                outcome=FileOutcome.UNCHANGED,
                dag_ids=[dag.dag_id for dag in manifest.dags],
            )
        try:
            declared = dags_declare(manifest=manifest, fileloc=fileloc)
        except ManifestError as exc:  # e.g. two active assets with one name: nothing written
            error = f"{exc}"
        else:
            if known_error:
                DagImportError.objects.filter(filename=fileloc).delete()
            transaction.on_commit(lambda: logger.info("loaded %s", fileloc))
            return FileResult(
                path=fileloc,
                outcome=FileOutcome.DECLARED,
                dag_ids=declared.dag_ids,
                stale_dag_ids=declared.stale_dag_ids,
                warnings=declared.warnings,
            )
    return _import_error_record(fileloc=fileloc, error=error)


def _import_error_record(*, fileloc: str, error: str) -> FileResult:
    """Upsert the file's ``import_error`` row; the same text as stored writes nothing."""
    stored = DagImportError.objects.filter(filename=fileloc).first()
    if stored is not None and stored.stacktrace == error:
        return FileResult(path=fileloc, outcome=FileOutcome.IMPORT_ERROR_UNCHANGED, error=error)
    DagImportError.objects.update_or_create(
        filename=fileloc, defaults={"stacktrace": error, "timestamp": timezone.now()}
    )
    transaction.on_commit(lambda: logger.warning("import error in %s", fileloc))
    return FileResult(path=fileloc, outcome=FileOutcome.IMPORT_ERROR, error=error)


@transaction.atomic
def dag_folder_forget_missing(*, folder: Path, present: Collection[Path]) -> list[FileResult]:
    """Files under ``folder`` that DAGs or import errors came from but that are no longer among
    its DAG files: their DAGs go stale and their import errors go."""
    root = str(folder.expanduser().resolve())
    prefix = root.rstrip(os.sep) + os.sep
    kept = {str(path) for path in present}
    gone_files = sorted(
        set(
            Dag.objects.filter(fileloc__startswith=prefix, is_stale=False).values_list(
                "fileloc", flat=True
            )
        )
        - kept
    )
    results = []
    for fileloc in gone_files:
        declared = dags_declare(manifest=Manifest(dags=()), fileloc=fileloc)
        results.append(
            FileResult(
                path=fileloc, outcome=FileOutcome.STALE, stale_dag_ids=declared.stale_dag_ids
            )
        )
    errors_gone = [
        pk
        for pk, filename in DagImportError.objects.filter(filename__startswith=prefix).values_list(
            "pk", "filename"
        )
        if filename not in kept
    ]
    if errors_gone:
        DagImportError.objects.filter(pk__in=errors_gone).delete()
    return results
