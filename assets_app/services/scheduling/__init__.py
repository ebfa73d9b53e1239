"""Scheduling: who waits for which event (consumption), asset-triggered and time-scheduled
runs, the queue watch, and upkeep (reaping, retries due)."""
