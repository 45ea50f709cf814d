"""Characterize: the microbenchmark suites (MIPP, instructions, roofline sweep), their runner and targets."""
