"""What a page says about a run's settings: the value where the run's config holds it, and where it does not (a run
trained elsewhere whose files or client never said it) "unknown", with why; never a blank or a None."""

from django import template
from django.utils.html import format_html

register = template.Library()


@register.filter
def known(value, run=None):
    """``{{ run.config.beta|known:run }}``: the value, or "unknown" saying why."""
    if value is None or value == "":
        return format_html(
            '<span class="unknown" data-unknown title="{}">unknown</span>',
            run.unknown_reason if run else "not in this run's config",
        )
    return value
