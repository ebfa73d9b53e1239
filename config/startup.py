"""What the server does once it has loaded the application (``config/wsgi.py``).

CPython's garbage collector runs a full collection, which walks every tracked object, each
time the objects that survived the younger collections reach a quarter of the old ones. A
loaded process holds about 130,000 objects (modules, classes, the URLconf, the serializers'
fields) that live until it exits, so a request that creates a few thousand objects (1,000
alias events) paid for walking all of them every three or four requests: 0.3 full
collections per request at 117 ms each, 35 ms of a 146 ms request (measured in a profiling
process holding 150,000 objects, ``bench_http``'s alias1000 payload). :func:`gc.freeze` moves
the objects alive now to a permanent generation that collections skip: the same requests
then paid 1.8 ms per request for full collections. Garbage among the frozen objects (cycles
made while loading) is never freed, so one collection runs first.

The scheduler and the worker do not call it: tests run their commands in process, where
freezing would keep the test process's objects for good.
"""

from __future__ import annotations

import gc

from django.urls import get_resolver


def loaded_objects_freeze() -> None:
    """Load what the first request would otherwise load (the URLconf imports every view,
    serializer and service module), collect the garbage of loading, then freeze every object
    alive (:func:`gc.freeze`). Call it once the application is loaded, before the first
    request or pass; calling it again freezes what was created since."""
    get_resolver().url_patterns  # noqa: B018 - the property imports the URLconf's modules
    gc.collect()
    gc.freeze()
