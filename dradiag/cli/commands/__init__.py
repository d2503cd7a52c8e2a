"""One module per command, each with ``register(app)``; discovered by ``cli/app.py``."""
