"""A PostgreSQL backend that counts the statements it sends (see ``base``). Bench only."""
