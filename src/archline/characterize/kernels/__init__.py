"""Pure-text PTX generators and the benchmark catalogue (building them needs no GPU)."""
