from django.apps import AppConfig


class PublicApiConfig(AppConfig):
    name = "publicapi"
    verbose_name = "Airflow public API"
