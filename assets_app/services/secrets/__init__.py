"""Secrets: variables, connections and key rotation, encrypted at rest."""
