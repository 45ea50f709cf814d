"""CUPTI: the in-process activity tracer and the injection library that traces any CUDA program."""
