"""Runs and task instances, one concept a module (each imports only those above it here):

- ``plans``: what scheduling reads of a DAG's declared tasks (retries, upstreams, rules);
- ``callbacks``: the DAG-level callback requests a run's end asks for;
- ``emails``: a failed or retried try's mail (``email_on_failure`` / ``email_on_retry``);
- ``settle``: a run's state as its task instances start and finish, ``dagrun_timeout``;
- ``past``: ``depends_on_past`` / ``wait_for_downstream``, what a task instance waits for;
- ``advance``: deciding waiting task instances by their trigger rules, the hand-over;
- ``admit``: creating runs and admitting them (``max_active_runs``);
- ``tries``: a task instance's tries (retry and its backoff, reschedule, history, a new id per
  try);
- ``claims``: who runs a task instance (worker claims, ``/run``, heartbeats);
- ``state``: the state patch of a running task instance and its other reports;
- ``dag_runs``: triggering a DAG, creating a task instance for an outside runner;
- ``clearing`` and ``marking``: an operator's clear and mark.
"""
