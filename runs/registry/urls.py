from django.urls import path

from runs.registry import views

urlpatterns = [
    path("models/", views.model_list, name="models"),
    path("models/<int:run_id>/adapter/download/", views.model_adapter_download, name="model_adapter_download"),
    path("models/<int:run_id>/<str:key>/download/", views.model_download, name="model_download"),
    path("models/<int:run_id>/<str:key>/export/", views.model_export_view, name="model_export"),
]
