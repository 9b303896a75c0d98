"""Prefect flows: wiring of the release tasks, no arithmetic."""
