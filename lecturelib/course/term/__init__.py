"""term (moved; the next commit writes this package's docstring and exports)."""
