"""The HTTP transport: the FastAPI app, the native API, admin and operations routes."""
