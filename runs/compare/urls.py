from django.urls import path

from runs.compare import views

urlpatterns = [
    path("runs/compare/", views.run_compare, name="run_compare"),
    path("runs/compare/metrics.json", views.run_compare_metrics, name="run_compare_metrics"),
    path("runs/compare/prompts.json", views.run_compare_prompts, name="run_compare_prompts"),
    path("runs/compare/transcripts.json", views.run_compare_transcripts, name="run_compare_transcripts"),
    path("runs/compare/events", views.run_compare_events, name="run_compare_events"),
]
