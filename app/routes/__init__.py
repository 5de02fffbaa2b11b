"""One router per concern; ``app.main`` mounts them."""
