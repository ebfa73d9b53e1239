"""Tooling around the registry that the registry itself does not need: child server processes
for the demo, the tests and the benchmarks, and ``manage.py demo``."""
