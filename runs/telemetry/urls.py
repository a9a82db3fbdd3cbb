from django.urls import path

from runs.telemetry import views

urlpatterns = [
    path("runs/<int:pk>/telemetry.json", views.run_telemetry_json, name="run_telemetry_json"),
]
