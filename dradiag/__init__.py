"""dradiag: read-only diagnosis of NVIDIA GPU allocation through Kubernetes DRA."""

__version__ = "0.1.0"
