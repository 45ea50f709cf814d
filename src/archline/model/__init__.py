"""The energy roofline, arch line and power line: fits, derived balances and predictions."""
