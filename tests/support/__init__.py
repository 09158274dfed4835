"""Helpers shared by the test modules (each module imports from here, not from another)."""
