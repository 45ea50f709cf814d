"""The archline command-line interface (Typer + Rich)."""
