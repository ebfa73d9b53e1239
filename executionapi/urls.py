"""Execution API routes (filled by the execution API issue)."""

app_name = "executionapi"
urlpatterns: list = []
