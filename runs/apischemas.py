"""Shared by the capabilities' JSON API routers (runs/<capability>/api.py): the error body every refusal answers."""

from __future__ import annotations

from ninja import Schema
from pydantic import Field


class Errors(Schema):
    errors: list[str] = Field(description="What is wrong, each naming the field, row or column.")
