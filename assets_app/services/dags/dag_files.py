"""Loading real Airflow DAG files: Airflow's DAG processor for the registry.

A folder is walked as Airflow walks its ``dags_folder`` (:func:`dag_files_list`: ``*.py``
files, ``.airflowignore`` glob patterns, the "might contain a DAG" heuristic of safe mode).
Each file is parsed **in a subprocess** with Airflow's own ``DagBag`` (``runtime/dag_parse.py``
under ``settings.DAG_PARSER_PYTHON``, so this process needs no Airflow), at most
``DAG_PARSER_PROCESSES`` at a time, each killed after ``DAG_FILE_PROCESSOR_TIMEOUT`` seconds.
The parser prints the file's DAGs as manifest entries (``assets_app.services.dags.manifest``), which
:func:`dag_file_store` stores with ``dags_declare`` — one transaction per file:

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

import json
import logging
import os
import re
import signal
import subprocess
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from assets_app.exceptions import DagParserError, ManifestError
from assets_app.models import Dag, DagImportError
from assets_app.services.dags.declare import dags_declare, dags_unchanged
from assets_app.services.dags.manifest import Manifest, manifest_parse

logger = logging.getLogger(__name__)

#: The parser script (run by path: the parser interpreter needs only Airflow).
PARSER_SCRIPT = Path(__file__).resolve().parents[2] / "runtime" / "dag_parse.py"
#: Airflow's ignore file, and the exit status the parser gives when Airflow is missing.
IGNORE_FILE = ".airflowignore"
PARSER_NO_AIRFLOW = 3
#: How much of a crashed parser's stderr an import error keeps.
STDERR_TAIL = 8000


# --- walking a folder ------------------------------------------------------------------------


@dataclass(frozen=True)
class _IgnoreRule:
    pattern: GitIgnoreSpecPattern
    relative_to: Path | None  # None: matches the name at any depth
    dir_only: bool


def _ignore_rules(ignore_file: Path) -> list[_IgnoreRule]:
    """The glob rules of one ``.airflowignore`` (gitignore syntax, ``#`` comments), as Airflow
    reads them (``[core] dag_ignore_file_syntax = glob``, its default)."""
    rules = []
    for line in ignore_file.read_text(encoding="utf-8", errors="replace").split("\n"):
        pattern = re.sub(r"\s*#.*", "", line)
        if not pattern or pattern.strip() == "/":
            continue
        anchored = pattern.startswith("/") or "/" in pattern.rstrip("/")
        raw = pattern.lstrip("!").rstrip()
        rules.append(
            _IgnoreRule(
                pattern=GitIgnoreSpecPattern(pattern),
                relative_to=ignore_file.parent if anchored else None,
                dir_only=raw != raw.rstrip("/"),
            )
        )
    return rules


def _ignored(path: Path, rules: list[_IgnoreRule], *, is_dir: bool) -> bool:
    """Whether the last rule matching ``path`` ignores it (``!`` rules re-include)."""
    ignored = False
    for rule in rules:
        if rule.dir_only and not is_dir:
            continue
        relative = path.relative_to(rule.relative_to) if rule.relative_to else Path(path.name)
        candidate = f"{relative.as_posix()}/" if is_dir else relative.as_posix()
        if rule.pattern.include is not None and rule.pattern.match_file(candidate) is not None:
            ignored = rule.pattern.include
    return ignored


def _might_contain_dag(path: Path) -> bool:
    """Airflow's safe-mode heuristic: the file mentions ``airflow`` and ``dag`` or ``asset``."""
    try:
        content = path.read_bytes().lower()
    except OSError:
        return False
    return b"airflow" in content and (b"dag" in content or b"asset" in content)


def dag_files_list(folder: Path) -> list[Path]:
    """The DAG files of ``folder`` (resolved, sorted), found as Airflow finds them."""
    root = folder.expanduser().resolve()
    if not root.is_dir():
        raise DagParserError(f"{folder}: not a folder")
    rules_by_dir: dict[Path, list[_IgnoreRule]] = {root: []}
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        here = Path(dirpath)
        rules = list(rules_by_dir.get(here, []))
        if (here / IGNORE_FILE).is_file():
            rules += _ignore_rules(here / IGNORE_FILE)
        dirnames[:] = sorted(
            name
            for name in dirnames
            if name != "__pycache__" and not _ignored(here / name, rules, is_dir=True)
        )
        for name in dirnames:
            if (here / name).resolve() in rules_by_dir:  # a symlink loop
                raise DagParserError(f"{folder}: {here / name} is walked twice (a symlink loop)")
            rules_by_dir[here / name] = rules
        found += [
            (here / name).resolve()
            for name in filenames
            if name.endswith(".py")
            and not _ignored(here / name, rules, is_dir=False)
            and _might_contain_dag(here / name)
        ]
    return sorted(found)


# --- parsing one file ------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedFile:
    """What the parser found in one file: its DAGs as manifest entries, or its errors."""

    path: Path
    entries: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _parser_env(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("AIRFLOW_HOME", str(settings.DAG_PARSER_HOME))
    env.update(
        AIRFLOW__CORE__DAGS_FOLDER=str(folder),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT=str(settings.DAGBAG_IMPORT_TIMEOUT),
        PYTHONUNBUFFERED="1",
    )
    Path(env["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)
    return env


def dag_file_parse(*, path: Path, folder: Path) -> ParsedFile:
    """Parse one file in a subprocess with Airflow's ``DagBag``; never raises for the file's
    own faults (they come back as ``errors``). Raises ``DagParserError`` when the parser
    cannot run at all."""
    timeout = settings.DAG_FILE_PROCESSOR_TIMEOUT
    argv = [settings.DAG_PARSER_PYTHON, str(PARSER_SCRIPT), str(path), "--bundle", str(folder)]
    try:
        process = subprocess.Popen(  # noqa: S603 - our script, the configured interpreter
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_parser_env(folder),
            cwd=folder,
            start_new_session=True,  # a timeout kills the file's own children too
        )
    except OSError as exc:
        raise DagParserError(
            f"cannot start the DAG parser {settings.DAG_PARSER_PYTHON!r} (DAG_PARSER_PYTHON): {exc}"
        ) from exc
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return ParsedFile(
            path=path,
            errors=[
                f"DAG file processor timed out after {timeout:g}s parsing {path} "
                "(DAG_FILE_PROCESSOR_TIMEOUT, Airflow's [dag_processor] "
                "dag_file_processor_timeout); it was killed"
            ],
        )
    err_text = stderr.decode("utf-8", errors="replace")
    if process.returncode == PARSER_NO_AIRFLOW:
        raise DagParserError(
            err_text.strip().splitlines()[-1] if err_text.strip() else "no Airflow"
        )
    try:
        document = json.loads(stdout.decode("utf-8"))
        return ParsedFile(path=path, entries=document["dags"], errors=document["errors"])
    except (ValueError, KeyError, TypeError):
        return ParsedFile(
            path=path,
            errors=[
                f"the DAG parser exited with status {process.returncode} on {path} without a "
                f"result; its output:\n{err_text[-STDERR_TAIL:]}"
            ],
        )


def dag_files_parse(*, paths: Collection[Path], folder: Path) -> Iterator[ParsedFile]:
    """Parse files, ``DAG_PARSER_PROCESSES`` subprocesses at a time, in ``paths`` order."""
    workers = max(1, settings.DAG_PARSER_PROCESSES)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dag-parse") as pool:
        yield from pool.map(lambda path: dag_file_parse(path=path, folder=folder), paths)


# --- storing one file ------------------------------------------------------------------------


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


# --- a whole folder --------------------------------------------------------------------------


@dataclass(frozen=True)
class FolderResult:
    folder: str
    files: list[FileResult]

    def count(self, outcome: FileOutcome) -> int:
        return sum(1 for result in self.files if result.outcome == outcome)


class DagFileWatch:
    """What a long-running processor remembers between passes: each file's modification time
    and size when it was last stored, so a pass parses only the files that changed."""

    def __init__(self) -> None:
        self._stored: dict[Path, tuple[int, int]] = {}
        self._pending: dict[Path, tuple[int, int]] = {}

    @staticmethod
    def _stat(path: Path) -> tuple[int, int]:
        try:
            stat = path.stat()
        except OSError:
            return (-1, -1)
        return (stat.st_mtime_ns, stat.st_size)

    def changed(self, paths: Collection[Path]) -> list[Path]:
        """The files new or changed since they were last stored (their stat taken now)."""
        self._pending = {path: self._stat(path) for path in paths}
        return [path for path, stat in self._pending.items() if self._stored.get(path) != stat]

    def stored(self, path: Path) -> None:
        """``path`` was stored as it was when :meth:`changed` looked at it."""
        if path in self._pending:
            self._stored[path] = self._pending[path]

    def forget_missing(self, present: Collection[Path]) -> None:
        for path in set(self._stored) - set(present):
            del self._stored[path]


def dag_folder_load(
    *,
    folder: Path,
    watch: DagFileWatch | None = None,
    on_file: Callable[[FileResult], None] | None = None,
) -> FolderResult:
    """Parse and store the DAG files of ``folder`` (with a ``watch``: only those changed since
    it last saw them), then forget the files no longer there. One transaction per file;
    ``on_file`` is called with each result."""
    root = folder.expanduser().resolve()
    present = dag_files_list(root)
    to_parse = present if watch is None else watch.changed(present)
    results: list[FileResult] = []
    for parsed in dag_files_parse(paths=to_parse, folder=root):
        result = dag_file_store(parsed=parsed, folder=root)
        if watch is not None:
            watch.stored(parsed.path)
        results.append(result)
        if on_file is not None:
            on_file(result)
    for result in dag_folder_forget_missing(folder=root, present=present):
        results.append(result)
        if on_file is not None:
            on_file(result)
    if watch is not None:
        watch.forget_missing(present)
    return FolderResult(folder=str(root), files=results)
