from airflow.sdk import DAG, Asset, task

ORDERS = Asset(name="orders", uri="s3://warehouse/orders")

with DAG(dag_id="orders_export", schedule="@daily", tags=["orders"]):

    @task(outlets=[ORDERS], retries=2)
    def export():
        pass

    @task(trigger_rule="all_done")
    def report():
        pass

    export() >> report()

with DAG(dag_id="orders_report", schedule=ORDERS, is_paused_upon_creation=False):

    @task(inlets=[ORDERS])
    def summarise():
        pass

    summarise()
