"""Tables, plots and Markdown/HTML reports rebuilt from run directories."""
