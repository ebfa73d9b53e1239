"""``@task``: declare a plain function as a task with inlets and outlets.

```python
@task(outlets=[Asset("report", "s3://bucket/report")])
def build_report(*, outlet_events):
    outlet_events[Asset("report", "s3://bucket/report")].extra["rows"] = 42
```

The runner passes the context entries the function names as parameters (``context``,
``outlet_events``, ``dag_run``, ``ti_id``, ...), or all of them to a ``**kwargs`` function.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, overload

from task_sdk.definitions import Outlet
from task_sdk.outlets import Metadata


class Task:
    """A function with its declared outlets and inlets."""

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        task_id: str | None = None,
        outlets: Iterable[Outlet] = (),
        inlets: Iterable[Outlet] = (),
    ) -> None:
        self.function = function
        self.task_id = task_id or function.__name__
        self.outlets: list[Outlet] = list(outlets)
        self.inlets: list[Outlet] = list(inlets)
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Task {self.task_id} outlets={self.outlets!r}>"

    def execute(self, context: Mapping[str, Any]) -> Any:
        """Call the function with the context entries it asks for.

        A generator function may yield ``Metadata``; what it returns is the task's result.
        """
        result = self.function(**select_kwargs(self.function, context))
        if not inspect.isgenerator(result):
            return result
        outlet_events = context.get("outlet_events")
        while True:
            try:
                item = next(result)
            except StopIteration as stop:
                return stop.value
            if isinstance(item, Metadata) and outlet_events is not None:
                outlet_events.record_metadata(item)


def select_kwargs(function: Callable[..., Any], context: Mapping[str, Any]) -> dict[str, Any]:
    parameters = inspect.signature(function).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(context)
    return {
        p.name: context[p.name]
        for p in parameters
        if p.name in context
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }


@overload
def task(function: Callable[..., Any], /) -> Task: ...


@overload
def task(
    *,
    task_id: str | None = None,
    outlets: Iterable[Outlet] = (),
    inlets: Iterable[Outlet] = (),
) -> Callable[[Callable[..., Any]], Task]: ...


def task(
    function: Callable[..., Any] | None = None,
    /,
    *,
    task_id: str | None = None,
    outlets: Iterable[Outlet] = (),
    inlets: Iterable[Outlet] = (),
) -> Task | Callable[[Callable[..., Any]], Task]:
    """Declare a task: ``@task`` or ``@task(outlets=[...], inlets=[...], task_id=...)``."""
    if function is not None:
        return Task(function)

    def decorate(func: Callable[..., Any]) -> Task:
        return Task(func, task_id=task_id, outlets=outlets, inlets=inlets)

    return decorate


def as_task(obj: Any) -> Task:
    """A ``Task`` for ``obj``: itself if decorated, else a task without inlets or outlets."""
    if isinstance(obj, Task):
        return obj
    if callable(obj):
        return Task(obj)
    raise TypeError(f"{obj!r} is not a function or a task")
