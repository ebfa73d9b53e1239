"""Runs and task instances: creating and triggering runs, task-instance states and tries,
claims, the flow of a run (trigger rules, settling), clearing and marking."""
