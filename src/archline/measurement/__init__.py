"""Measure: sampling, sensor models, artefact correction, window energies and the measuring API."""
