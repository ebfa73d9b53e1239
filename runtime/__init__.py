"""The processes that run things: the scheduler, DAG processor and worker daemons and their
one loop (``daemon``), the DAG processor's folder walk and parser subprocesses
(``dag_processing``, ``dag_parse``), and the recipe that launches one task instance's process
(``launch``: ``task_sdk`` or Airflow's worker, ``airflow_task``).

The domain (``assets_app``) never imports this package, nor the task SDK's runtime."""
