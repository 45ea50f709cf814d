"""Value types shared by every layer: readings, recordings, activity records, kernels, the executor protocol."""
