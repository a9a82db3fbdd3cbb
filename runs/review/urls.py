from django.urls import path

from runs.review import views

urlpatterns = [
    path("runs/<int:pk>/reviews/new/", views.run_review_new, name="run_review_new"),
    path("runs/<int:pk>/reviews/<int:review_id>/", views.run_review, name="run_review"),
]
