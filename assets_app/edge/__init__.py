"""The edge kit of the three APIs (``/execution/``, ``/api/v1/``, ``/api/v2/``): what every face
does the same at its HTTP edge, so that the faces cannot disagree on it.

- :mod:`assets_app.edge.errors`: the HTTP status of each domain error (one map, keyed by the
  classes of :mod:`assets_app.exceptions`), the headers of an error answer, and the one
  exception handler whose error bodies each face supplies;
- :mod:`assets_app.edge.parsers`: the request body under its size cap, and the JSON parser.

The APIs import this package; nothing here imports an API.
"""
