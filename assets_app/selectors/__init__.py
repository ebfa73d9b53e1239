"""Read-side queries (STYLE §3), one module per subdomain, beside ``models/`` and ``services/``."""
