"""DAGs as declared: the manifest, declaring its DAGs and assets, and DAG files' results."""
