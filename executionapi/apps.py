from django.apps import AppConfig


class ExecutionApiConfig(AppConfig):
    name = "executionapi"
    verbose_name = "Execution API"
