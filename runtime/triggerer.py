"""``manage.py triggerer``: run the triggers of deferred task instances (Airflow's
``TriggererJobRunner``; docs/triggerer.md).

Each pass (the loop is :class:`runtime.daemon.Daemon`'s) heartbeats this triggerer's row,
frees the triggers of dead triggerers and claims triggers up to ``capacity``
(``services.runs.triggers.triggers_claim``), schedules the deferred task instances past their
timeout to fail, then makes the running set match the claimed one: a newly claimed trigger
is started, one no longer claimed (its task instance moved on, or another triggerer took it
over) is cancelled. Events and failures are then submitted: the waiting task instance goes
back to ``scheduled`` with the event (``trigger_event_submit``), or to fail
(``trigger_failure_submit``).

The triggers are Airflow's own classes, imported by classpath and built from their kwargs
decoded as Airflow's triggerer does (JSON, then the SDK's serde with the
``BaseSerialization`` fallback, then ``smart_decode_trigger_kwargs``). They run as tasks of
one asyncio event loop on a thread of its own (:class:`TriggerLoop`); the database work
stays on the main thread. A trigger's first event ends it (task triggers fire once); a
task-end event (``TaskSuccessEvent`` …, ``end_from_trigger``) ends its task instance without
a worker (``trigger_task_end_submit``); one that ends without an event, raises, or cannot
be built fails its task instances with the traceback, as in Airflow.

Asset watchers' triggers (``services.runs.watchers``; each pass first makes the running
watchers match the declared ones) run until cancelled: every event is numbered and becomes
asset events exactly once (``watcher_event_submit``); one that ends is started again at the
next pass, one that raises after :data:`WATCHER_RESTART_DELAY`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from assets_app.services.runs.triggers import (
    TriggerWork,
    task_instances_deferral_timeout,
    task_instances_start_in_triggerer,
    trigger_event_submit,
    trigger_failure_submit,
    trigger_task_end_submit,
    triggerer_heartbeat,
    triggers_assigned,
    triggers_claim,
    triggers_clean,
)
from assets_app.services.runs.watchers import (
    asset_watchers_sync,
    watcher_event_submit,
    with_watchers,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Fired:
    """What a trigger ended with: an event's payload, or a failure's traceback lines."""

    trigger_id: int
    payload: Any = None
    failure: list[str] | None = None
    #: a task-end event's state (``end_from_trigger``: the task ends without a worker)
    end_state: str | None = None
    xcoms: dict[str, Any] | None = None
    #: an asset watcher's trigger: ``sequence`` numbers an event (``None``: it ended)
    watcher: bool = False
    sequence: int | None = None


def airflow_home() -> None:
    """Airflow's code reads its home when imported: ours, not ``~/airflow``."""
    home = os.environ.setdefault("AIRFLOW_HOME", str(settings.DAG_PARSER_HOME))
    os.makedirs(home, exist_ok=True)
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


def trigger_build(classpath: str, kwargs_text: str) -> Any:
    """An Airflow trigger instance from its classpath and stored kwargs, decoded as Airflow's
    triggerer does (``Trigger._decrypt_kwargs`` then ``smart_decode_trigger_kwargs``). A
    string the client encrypted (not JSON) cannot be read here: ``ValueError``."""
    import json

    from airflow.sdk.module_loading import import_string  # type: ignore[attr-defined]
    from airflow.sdk.serde import deserialize
    from airflow.serialization.decoders import smart_decode_trigger_kwargs

    if not kwargs_text.startswith("{"):
        raise ValueError(
            "the trigger's kwargs are not JSON (encrypted by the client?): this registry "
            "cannot decrypt them"
        )
    raw = json.loads(kwargs_text)
    try:
        decoded = deserialize(raw)
    except (ImportError, KeyError, AttributeError, TypeError):
        from airflow.serialization.serialized_objects import BaseSerialization

        decoded = BaseSerialization.deserialize(raw)
    if not isinstance(decoded, dict):
        raise ValueError(f"the trigger's kwargs decoded to {type(decoded).__name__}, not a dict")
    trigger_class = import_string(classpath)
    kwargs = {key: smart_decode_trigger_kwargs(v) for key, v in decoded.items()}  # type: ignore[no-untyped-call]
    return trigger_class(**kwargs)


@dataclass(eq=False)
class TriggerLoop:
    """An asyncio event loop on a thread of its own running triggers; what they end with
    goes to ``fired`` (read on the main thread). ``on_fired`` is called (on the loop's
    thread) after each: it should only set a flag."""

    on_fired: Callable[[], None] = lambda: None
    fired: queue.SimpleQueue[Fired] = field(default_factory=queue.SimpleQueue)
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _thread: threading.Thread | None = None
    _tasks: dict[int, asyncio.Task[None]] = field(default_factory=dict)  # the loop's thread only
    #: the triggers started and not yet ended (as the main thread knows them)
    running: set[int] = field(default_factory=set)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop.run_forever, name="triggers", daemon=True)
        self._thread.start()

    def add(self, work: TriggerWork) -> None:
        """Start ``work``'s trigger; a trigger that cannot be built fails at once."""
        self.running.add(work.id)
        try:
            trigger = trigger_build(work.classpath, work.kwargs)
        except Exception as exc:
            logger.error("trigger %s (%s) could not be built: %s", work.id, work.label, exc)
            failure = [f"Trigger {work.classpath} could not be built: {exc}\n"]
            failure += traceback.format_exception(exc)
            self._put(Fired(work.id, failure=failure, watcher=work.watcher))
            return
        trigger.trigger_id = work.id
        trigger.timeout_after = work.timeout
        logger.info("trigger %s starting for %s: %r", work.id, work.label, trigger)
        self._loop.call_soon_threadsafe(
            self._create, work.id, trigger, work.sequence if work.watcher else None
        )

    def cancel(self, trigger_id: int) -> None:
        """Stop running a trigger (no longer claimed by this triggerer); nothing is submitted."""
        self.running.discard(trigger_id)
        self._loop.call_soon_threadsafe(self._cancel, trigger_id)

    def ended(self, trigger_id: int) -> None:
        self.running.discard(trigger_id)

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel every trigger, then stop the loop and its thread."""
        if self._thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._cancel_all(), self._loop)
        try:
            future.result(timeout)
        except Exception:
            logger.exception("triggers did not all stop")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        self.running.clear()

    # --- on the loop's thread ------------------------------------------------------------

    def _put(self, fired: Fired) -> None:
        self.fired.put(fired)
        self.on_fired()

    def _create(self, trigger_id: int, trigger: Any, sequence: int | None) -> None:
        if trigger_id in self._tasks:
            return
        run = (
            self._run(trigger_id, trigger)
            if sequence is None
            else self._watch(trigger_id, trigger, sequence)
        )
        self._tasks[trigger_id] = self._loop.create_task(run, name=f"trigger {trigger_id}")

    def _cancel(self, trigger_id: int) -> None:
        task = self._tasks.pop(trigger_id, None)
        if task is not None:
            task.cancel()

    async def _cancel_all(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, trigger_id: int, trigger: Any) -> None:
        """Run one trigger to its first event (Airflow's ``run_trigger``)."""
        try:
            async for event in trigger.run():
                logger.info("trigger %s fired: %r", trigger_id, event)
                end_state = getattr(event, "task_instance_state", None)  # a BaseTaskEndEvent
                self._put(
                    Fired(
                        trigger_id,
                        payload=event.payload,
                        end_state=str(getattr(end_state, "value", end_state))
                        if end_state is not None
                        else None,
                        xcoms=getattr(event, "xcoms", None),
                    )
                )
                return
            self._put(
                Fired(
                    trigger_id,
                    failure=[f"Trigger {trigger_id} exited without sending an event"],
                )
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.error("trigger %s failed: %s", trigger_id, exc)
            self._put(Fired(trigger_id, failure=traceback.format_exception(exc)))
        finally:
            self._tasks.pop(trigger_id, None)
            try:
                await trigger.cleanup()
            except Exception:
                logger.exception("trigger %s cleanup failed", trigger_id)

    async def _watch(self, trigger_id: int, trigger: Any, sequence: int) -> None:
        """Run an asset watcher's trigger: every event is submitted, numbered on from
        ``sequence`` (the events registered before it started); then its end or failure."""
        try:
            async for event in trigger.run():
                sequence += 1
                logger.info("watcher trigger %s fired (event %d): %r", trigger_id, sequence, event)
                self._put(Fired(trigger_id, payload=event.payload, watcher=True, sequence=sequence))
            self._put(Fired(trigger_id, watcher=True))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.error("watcher trigger %s failed: %s", trigger_id, exc)
            self._put(Fired(trigger_id, watcher=True, failure=traceback.format_exception(exc)))
        finally:
            self._tasks.pop(trigger_id, None)
            try:
                await trigger.cleanup()
            except Exception:
                logger.exception("trigger %s cleanup failed", trigger_id)


#: Seconds before a watcher's trigger that failed is started again (one that ended cleanly,
#: as ``FileDeleteTrigger`` after its event, starts again at the next pass).
WATCHER_RESTART_DELAY = 5.0


@dataclass(frozen=True)
class PassReport:
    started: int
    cancelled: int
    resumed: list[str]
    failed: list[str]
    timed_out: int
    released: int


@dataclass(eq=False)
class TriggererPass:
    """One triggerer's passes over the database (the main thread)."""

    triggerer_id: int
    capacity: int
    loop: TriggerLoop
    #: watchers' triggers that failed: not started again before this ``time.monotonic()``
    restart_after: dict[int, float] = field(default_factory=dict)

    def run(self) -> PassReport:
        triggerer_heartbeat(triggerer_id=self.triggerer_id)
        asset_watchers_sync()
        claim = triggers_claim(triggerer_id=self.triggerer_id, capacity=self.capacity)
        timed_out = task_instances_deferral_timeout()
        task_instances_start_in_triggerer()
        triggers_clean()
        resumed, failed = self.submit()
        assigned = with_watchers(triggers_assigned(triggerer_id=self.triggerer_id))
        wanted = {work.id: work for work in assigned}
        started = 0
        now = time.monotonic()
        for trigger_id, work in wanted.items():
            if trigger_id not in self.loop.running and self.restart_after.get(trigger_id, 0) <= now:
                self.restart_after.pop(trigger_id, None)
                self.loop.add(work)
                started += 1
        stale = self.loop.running - set(wanted)
        for trigger_id in stale:
            logger.info("trigger %s no longer ours (its task moved on, or taken over)", trigger_id)
            self.loop.cancel(trigger_id)
        more_resumed, more_failed = self.submit()  # a trigger that failed to build, at once
        return PassReport(
            started=started,
            cancelled=len(stale),
            resumed=resumed + more_resumed,
            failed=failed + more_failed,
            timed_out=timed_out,
            released=claim.released,
        )

    def submit(self) -> tuple[list[str], list[str]]:
        """Submit what the triggers ended with: (resumed, failed) task instances' labels."""
        from airflow.sdk.serde import serialize

        resumed: list[str] = []
        failed: list[str] = []
        while True:
            try:
                fired = self.loop.fired.get_nowait()
            except queue.Empty:
                return resumed, failed
            if fired.watcher:
                self.watcher_submit(fired)
                continue
            self.loop.ended(fired.trigger_id)
            if fired.end_state is not None:
                done = trigger_task_end_submit(
                    trigger_id=fired.trigger_id, state=fired.end_state, xcoms=fired.xcoms
                )
                resumed += [f"{one.label} ({one.next_method})" for one in done]
                continue
            if fired.failure is None:
                try:
                    payload = serialize(fired.payload)
                except Exception as exc:
                    fired = Fired(
                        fired.trigger_id,
                        failure=[
                            "Could not resume the task: the event payload could not be "
                            f"serialized ({type(exc).__name__}: {exc})"
                        ],
                    )
                else:
                    done = trigger_event_submit(trigger_id=fired.trigger_id, payload=payload)
                    resumed += [f"{one.label} ({one.next_method})" for one in done]
                    continue
            done = trigger_failure_submit(trigger_id=fired.trigger_id, traceback=fired.failure)
            failed += [one.label for one in done]

    def watcher_submit(self, fired: Fired) -> None:
        """An asset watcher's event becomes asset events (exactly once); its end or failure
        lets it start again (a failure after :data:`WATCHER_RESTART_DELAY`)."""
        from airflow.sdk.serde import serialize

        if fired.sequence is None:
            self.loop.ended(fired.trigger_id)
            if fired.failure is not None:
                logger.error(
                    "watcher trigger %s failed, starting it again in %.0f s:\n%s",
                    fired.trigger_id,
                    WATCHER_RESTART_DELAY,
                    "".join(fired.failure),
                )
                self.restart_after[fired.trigger_id] = time.monotonic() + WATCHER_RESTART_DELAY
            return
        try:
            payload = serialize(fired.payload)
        except Exception as exc:
            logger.error(
                "watcher trigger %s: its event's payload could not be serialized (%s: %s); "
                "registered without it",
                fired.trigger_id,
                type(exc).__name__,
                exc,
            )
            payload = None
        watcher_event_submit(trigger_id=fired.trigger_id, sequence=fired.sequence, payload=payload)
