"""Django's admin (/admin/), where staff manage accounts (docs/api.md, "Accounts"): add a user with a first password, and
from the user list deactivate or reactivate several at once. A deactivated user can no longer log in or use a token;
what they own stays, and reactivating them gives it back."""

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

User = get_user_model()


@admin.action(description="Deactivate the selected users (they can no longer log in)")
def deactivate(modeladmin, request, queryset):
    if queryset.filter(pk=request.user.pk).exists():
        modeladmin.message_user(request, "You cannot deactivate yourself: left out.", messages.WARNING)
    count = queryset.exclude(pk=request.user.pk).update(is_active=False)
    modeladmin.message_user(request, f"Deactivated {count} user{'s' if count != 1 else ''}.")


@admin.action(description="Reactivate the selected users")
def reactivate(modeladmin, request, queryset):
    count = queryset.update(is_active=True)
    modeladmin.message_user(request, f"Reactivated {count} user{'s' if count != 1 else ''}.")


admin.site.unregister(User)


@admin.register(User)
class AccountAdmin(UserAdmin):
    actions = [deactivate, reactivate]
    list_display = ("username", "email", "is_active", "is_staff", "last_login", "date_joined")
    list_filter = ("is_active", "is_staff", "is_superuser", "groups")
