"""The only code that touches the CUDA driver: device facts, JIT, launches, timing, CUPTI."""
