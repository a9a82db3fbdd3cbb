from django.urls import path

from runs.recipes import views

urlpatterns = [
    path("recipes/", views.recipe_list, name="recipes"),
    path("recipes/<int:pk>/", views.recipe_detail, name="recipe_detail"),
    path("recipes/<int:pk>/recipe.yaml", views.recipe_yaml, name="recipe_yaml"),
    path("recipes/<int:pk>/pipeline.json", views.recipe_pipeline_json, name="recipe_pipeline_json"),
    path("recipes/<int:pk>/clone/", views.recipe_clone_view, name="recipe_clone"),
    path("recipes/<int:pk>/<slug:action>/", views.recipe_action, name="recipe_action"),
]
