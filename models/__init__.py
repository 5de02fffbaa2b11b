"""Request and response schemas (pydantic v2). Imports neither ``solver`` nor ``app``."""
