from django.urls import path

from runs.datasets import code_bench, views

urlpatterns = [
    path("datasets/imports/<int:pk>/", views.dataset_import_detail, name="dataset_import_detail"),
    path("datasets/imports/<int:pk>.json", views.dataset_import_json, name="dataset_import_json"),
    path("datasets/code-tests/", code_bench.code_tests_bench, name="code_tests_bench"),
    path("datasets/code-tests/run/", code_bench.code_tests_bench_run, name="code_tests_bench_run"),
    path("datasets/code-tests/run/<str:task_id>/", code_bench.code_tests_bench_result, name="code_tests_bench_result"),
    path("datasets/upload/", views.dataset_upload, name="dataset_upload"),
    path("datasets/<int:pk>/", views.dataset_detail, name="dataset_detail"),
    path("datasets/<int:pk>/upload/", views.dataset_upload, name="dataset_upload_version"),
    path("datasets/<int:pk>/versions/<int:number>/", views.dataset_detail, name="dataset_version"),
    path("datasets/<int:pk>/versions/<int:number>/mapping/", views.dataset_mapping, name="dataset_mapping"),
]
