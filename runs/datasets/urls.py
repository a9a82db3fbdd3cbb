from django.urls import path

from runs.datasets import views

urlpatterns = [
    path("datasets/upload/", views.dataset_upload, name="dataset_upload"),
    path("datasets/<int:pk>/", views.dataset_detail, name="dataset_detail"),
    path("datasets/<int:pk>/upload/", views.dataset_upload, name="dataset_upload_version"),
    path("datasets/<int:pk>/versions/<int:number>/", views.dataset_detail, name="dataset_version"),
    path("datasets/<int:pk>/versions/<int:number>/mapping/", views.dataset_mapping, name="dataset_mapping"),
]
