"""Sampling, sensor-artefact correction and energy integration."""
