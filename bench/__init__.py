"""Benchmarks (scripts that print numbers) and their bench-only settings, backend, middleware."""
