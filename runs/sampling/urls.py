from django.urls import path

from runs.sampling import views

urlpatterns = [
    path("sampling/", views.job_list, name="rejection_jobs"),
    path("sampling/new/", views.job_new, name="rejection_job_new"),
    path("sampling/<int:pk>/", views.job_detail, name="rejection_job_detail"),
    path("sampling/<int:pk>/status.json", views.job_status_json, name="rejection_job_status"),
]
