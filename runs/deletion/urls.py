from django.urls import path

from runs.deletion import views

urlpatterns = [
    path("runs/<int:pk>/delete/", views.run_delete_view, name="run_delete"),
    path("datasets/<int:pk>/delete/", views.dataset_delete_view, name="dataset_delete"),
    path("rewards/<int:pk>/delete/", views.reward_delete_view, name="reward_delete"),
    path("models/<int:run_id>/<str:key>/delete/", views.model_delete_view, name="model_delete"),
]
