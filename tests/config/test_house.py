"""The house's structure, read from the code's own imports (docs/development.md, "The house").

Two rules are held here so that a move that breaks them fails at once instead of being found
by the next review:

- **Floors**: a package imports only its own code and the packages on floors below it (the
  task SDK at the bottom; the domain; the three APIs and the runtime side by side; settings
  and URLs; the developer tools). Packages on one floor never import each other.
- **The domain's inner map**: inside ``assets_app``, each room imports only the rooms the map
  lets it (``ROOMS_BELOW``), and no two rooms import each other through any path (no circle).
  A new room (a subdomain's ``models/``, ``selectors/`` or ``services/`` module) must be
  placed on the map before it can be imported.

Imports inside functions count as much as those at the top: a circle hidden in a function is
still a circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live_server import REPO

ROOT = REPO

#: The project's packages, floor by floor from the bottom; packages on one floor never import
#: each other.
FLOORS: list[set[str]] = [
    {"task_sdk"},
    {"assets_app"},
    {"runtime", "executionapi", "operatorapi", "publicapi"},
    {"config"},
    {"devtools"},
]

#: The domain's rooms and the rooms each may import (besides itself). The value modules
#: (``VALUES``: errors, rules of input, value types) are under every room and import only
#: each other and ``models``' constants.
VALUES = {
    "exceptions",
    "validators",
    "conditions",
    "mapping",
    "timetables",
    "trigger_rules",
    "weight_rules",
    "outlets",
    "signals",
    "notify",
    "crypto",
    "masking",
    "tokens",
    "formats",
    "paginators",
    "params",
}
SERVICES = [
    "sql",
    "inputs",
    "audit",
    "accounts",
    "state",
    "secrets",
    "assets",
    "runs",
    "scheduling",
    "dags",
]
ROOMS_BELOW: dict[str, set[str]] = {
    "models": set(),
    "selectors.assets": {"models"},
    "selectors.dags": {"models"},
    "selectors.runs": {"models"},
    "selectors.secrets": {"models"},
    "selectors.logs": {"models"},
    "selectors.audit": {"models"},
    "services.sql": {"models"},
    "services.inputs": set(),
    # the event log every writing service records its use case in
    "services.audit": {"models"},
    "services.accounts": {"models"},
    "services.state": {"models", "services.sql"},
    "services.secrets": {"models", "selectors.secrets", "services.inputs", "services.audit"},
    "services.assets": {"models", "selectors.assets", "services.sql", "services.audit"},
    "services.runs": {
        "models",
        "selectors.runs",
        "selectors.logs",
        "selectors.secrets",  # a task's log is masked with the secrets the server knows
        "services.sql",
        "services.inputs",
        "services.assets",
        "services.state",
        "services.audit",
    },
    "services.scheduling": {
        "models",
        "selectors.dags",
        "selectors.runs",
        "services.sql",
        "services.assets",
        "services.runs",
    },
    "services.dags": {
        "models",
        "selectors.dags",
        "services.runs",  # a load starts and stops asset watchers' triggers
        "services.sql",
        "services.assets",
        "services.state",
        "services.scheduling",
        "services.audit",
    },
}
#: The faces of the domain (pages, commands, checks) may use every room; no room uses them.
FACES = {"admin", "management", "templatetags", "checks", "apps", "edge"}


def _python_files(package: str) -> Iterator[Path]:
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if "migrations" in parts or "tests" in parts:
            continue
        yield path


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, anywhere in it (``from a import b`` as ``a.b``: ``b`` may
    be a module)."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                base = _module_name(path).split(".")
                if path.name != "__init__.py":
                    base.pop()
                module = ".".join([*base[: len(base) - node.level + 1], node.module])
            else:
                module = node.module
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def _floor(package: str) -> int | None:
    return next((i for i, floor in enumerate(FLOORS) if package in floor), None)


def _room(module: str) -> str | None:
    """The domain room of an ``assets_app`` module, or None outside the domain."""
    parts = module.split(".")
    if parts[0] != "assets_app" or len(parts) < 2:
        return None
    if parts[1] in {"selectors", "services"}:
        return ".".join(parts[1:3]) if len(parts) > 2 else parts[1]
    return parts[1]


def _edges(package: str, room_of) -> set[tuple[str, str, str]]:
    edges = set()
    for path in _python_files(package):
        source = room_of(_module_name(path))
        for imported in _imports(path):
            target = room_of(imported)
            if source and target and source != target:
                edges.add((source, target, str(path.relative_to(ROOT))))
    return edges


def test_every_package_imports_only_floors_below():
    wrong = []
    for floor in FLOORS:
        for package in floor:
            for source, target, where in _edges(package, lambda m: m.split(".")[0]):
                target_floor = _floor(target)
                if target_floor is not None and target_floor >= _floor(source):
                    wrong.append(f"{where} imports {target} (floor {target_floor + 1})")
    assert wrong == []


def _room_allowed(source: str, target: str) -> bool:
    if target in {"selectors", "services"}:  # the packages' docstrings only
        return True
    if source in FACES:
        return True
    if target in FACES:
        return False
    if target in VALUES:
        return True
    if source in VALUES:
        return target == "models"  # the id lengths
    return target in ROOMS_BELOW.get(source, set())


def test_domain_rooms_import_only_the_rooms_below_them():
    rooms = ROOMS_BELOW.keys() | VALUES | FACES
    unknown, wrong = set(), []
    for source, target, where in _edges("assets_app", _room):
        for room in (source, target):
            if room not in rooms and room not in {"selectors", "services"}:
                unknown.add(room)
        if not _room_allowed(source, target):
            wrong.append(f"{where}: {source} imports {target}")
    assert unknown == set(), "rooms not on the map (tests/config/test_house.py)"
    assert wrong == []


def test_domain_rooms_have_no_circle():
    graph: dict[str, set[str]] = {}
    for source, target, _where in _edges("assets_app", _room):
        graph.setdefault(source, set()).add(target)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            room = todo.pop()
            if room == goal:
                return True
            if room not in seen:
                seen.add(room)
                todo.extend(graph.get(room, ()))
        return False

    circles = sorted(
        f"{a} -> {b} -> … -> {a}" for a, targets in graph.items() for b in targets if reaches(b, a)
    )
    assert circles == []


@pytest.mark.parametrize("room", sorted(ROOMS_BELOW))
def test_every_room_on_the_map_exists(room):
    path = ROOT / "assets_app" / Path(*room.split("."))
    assert path.is_dir() or path.with_suffix(".py").is_file()
