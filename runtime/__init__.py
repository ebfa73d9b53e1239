"""The processes that run things: the scheduler and worker daemons, their shared loop, and the
recipe that launches one task instance's process (``task_sdk`` or Airflow's worker).

The domain (``assets_app``) never imports this package, nor the task SDK's runtime."""
