from django.urls import path

from runs.attach import import_views

urlpatterns = [
    path("runs/import-files/", import_views.run_import_files, name="run_import_files"),
    path("runs/<int:pk>/import/stop/", import_views.run_import_stop_view, name="run_import_stop"),
]
