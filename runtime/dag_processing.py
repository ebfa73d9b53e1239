"""The DAG processor's process half: Airflow's DAG processor for the registry.

A folder is walked as Airflow walks its ``dags_folder`` (:func:`dag_files_list`: ``*.py``
files, ``.airflowignore`` glob patterns, the "might contain a DAG" heuristic of safe mode).
Each file is parsed **in a subprocess** with Airflow's own ``DagBag`` (:mod:`runtime.dag_parse`
under ``settings.DAG_PARSER_PYTHON``, so this process needs no Airflow), at most
``DAG_PARSER_PROCESSES`` at a time (a thread per running parser), each killed after
``DAG_FILE_PROCESSOR_TIMEOUT`` seconds. What a parser prints is a
:class:`~assets_app.services.dags.dag_files.ParsedFile`, which the domain stores
(``dag_file_store``: the file's DAGs declared, or its import error recorded; one transaction
per file), and the files gone from the folder are forgotten (``dag_folder_forget_missing``).

:func:`dag_folder_load` is the one loader: ``manage.py declare_dags --dags-folder`` runs it
once, ``manage.py dag_processor`` once per pass with a :class:`DagFileWatch`, which parses
only the files changed since the last pass.

The parser is started by its path, taken from the imported module (``PARSER_SCRIPT``), not as
``python -m runtime.dag_parse``: ``DAG_PARSER_PYTHON`` may name an interpreter that has
Airflow but not the registry on its path, and the script imports nothing of the registry.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from assets_app.exceptions import DagParserError
from assets_app.services.dags.dag_files import (
    FileOutcome,
    FileResult,
    ParsedFile,
    dag_file_store,
    dag_folder_forget_missing,
)
from runtime import dag_parse

#: The parser script, run by its path under ``DAG_PARSER_PYTHON`` (see the module docstring).
PARSER_SCRIPT = dag_parse.__file__
#: Airflow's ignore file.
IGNORE_FILE = ".airflowignore"
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
    try:  # read before the parse: the text kept as the DAG code is the text parsed
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        source = ""
    argv = [settings.DAG_PARSER_PYTHON, PARSER_SCRIPT, str(path), "--bundle", str(folder)]
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
    if process.returncode == dag_parse.NO_AIRFLOW:
        raise DagParserError(
            err_text.strip().splitlines()[-1] if err_text.strip() else "no Airflow"
        )
    try:
        document = json.loads(stdout.decode("utf-8"))
        return ParsedFile(
            path=path, entries=document["dags"], errors=document["errors"], source=source
        )
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


# --- a whole folder, once or pass after pass ------------------------------------------------


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
