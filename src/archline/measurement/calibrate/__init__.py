"""Sensor calibration: known loads on the GPU, the fit of each power source's response, stored profiles."""
