from django.apps import AppConfig


class OperatorApiConfig(AppConfig):
    name = "operatorapi"
    verbose_name = "Operator API"
