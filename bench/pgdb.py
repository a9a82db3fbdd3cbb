"""The benchmarks' own PostgreSQL databases: created, reused and dropped here, never one that others use."""

from __future__ import annotations

from urllib.parse import urlparse


def _admin(url: str):
    """A connection to the server's maintenance database, and the bench database's name."""
    import psycopg

    parts = urlparse(url)
    return psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True), parts.path.lstrip("/")


def create(url: str, *, fresh: bool = True) -> None:
    """Create the database; ``fresh``: drop an existing one first, else keep it."""
    admin, name = _admin(url)
    with admin:
        if fresh:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        elif admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            return
        admin.execute(f'CREATE DATABASE "{name}"')


def drop(url: str) -> None:
    """Drop the database, after closing this process's Django connections to it."""
    from django.db import connections

    connections.close_all()
    admin, name = _admin(url)
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
