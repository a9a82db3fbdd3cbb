from django.urls import path

from runs.evaluations import views

urlpatterns = [
    path("runs/<int:pk>/evaluations.json", views.run_evaluations_json, name="run_evaluations_json"),
    path("runs/<int:pk>/evaluations/<int:evaluation_id>/", views.evaluation_detail, name="evaluation_detail"),
    path("runs/<int:pk>/evaluations/<int:evaluation_id>.jsonl", views.evaluation_jsonl, name="evaluation_jsonl"),
]
