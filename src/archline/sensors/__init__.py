"""Power sources (NVML, simulated sensors, trace files) behind one PowerSource interface."""
