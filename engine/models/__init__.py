"""Pydantic entities, one module per seed area."""
