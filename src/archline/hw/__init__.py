"""The only code that touches hardware or its tools: NVML, the CUDA driver, CUPTI, ncu, ptxas and nvdisasm."""
