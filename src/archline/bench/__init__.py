"""The benchmark runner: calibrate repetitions, warm up, measure, verify, record."""
