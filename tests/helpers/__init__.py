"""Shared test code: fakes, simulated devices, data builders (import from here, not conftest)."""
