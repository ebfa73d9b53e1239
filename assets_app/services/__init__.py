"""Writing use cases (services), one module per area; each owns its transaction (STYLE §3)."""
