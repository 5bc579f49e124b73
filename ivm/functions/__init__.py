"""Functions ivm knows the incremental behaviour of (the aggregate registry)."""
