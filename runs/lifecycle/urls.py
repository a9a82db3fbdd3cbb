from django.urls import path

from runs.lifecycle import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("runs/new/", views.run_new, name="run_new"),
    path("runs/<int:pk>/", views.run_detail, name="run_detail"),
    path("runs/<int:pk>/status.json", views.run_status_json, name="run_status_json"),
    path("runs/<int:pk>/metrics.json", views.run_metrics_json, name="run_metrics_json"),
    path("runs/<int:pk>/series.json", views.run_series_json, name="run_series_json"),
    path("runs/<int:pk>/steps/<int:step>.json", views.run_step_json, name="run_step_json"),
    path(
        "runs/<int:pk>/steps/<int:step>/completions/<int:index>.json",
        views.run_step_completion_json,
        name="run_step_completion_json",
    ),
    path("runs/<int:pk>/events", views.run_events, name="run_events"),
    path("runs/<int:pk>/progress.json", views.run_progress_json, name="run_progress_json"),
    path("runs/<int:pk>/cancel/", views.run_cancel_view, name="run_cancel"),
    path("runs/<int:pk>/resume/", views.run_resume_view, name="run_resume"),
    path("runs/<int:pk>/retry/", views.run_retry_view, name="run_retry"),
    path("runs/<int:pk>/clone/", views.run_clone, name="run_clone"),
    path("runs/<int:pk>/diff/<int:other>/", views.run_diff, name="run_diff"),
    path("runs/<int:pk>/config.yaml", views.run_yaml_view, name="run_yaml"),
    path("runs/<int:pk>/notes/", views.run_notes, name="run_notes"),
    path("runs/<int:pk>/pin/", views.run_pin_view, name="run_pin"),
    path("runs/<int:pk>/evaluations/", views.run_evaluate, name="run_evaluate"),
    path("runs/import/", views.run_import, name="run_import"),
]
