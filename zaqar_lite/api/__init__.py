"""The HTTP API (falcon WSGI)."""
