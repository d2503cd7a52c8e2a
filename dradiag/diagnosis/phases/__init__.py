"""The seven phases of a claim's life (DESIGN §2), one module each, each exposing ``phase_<id>``."""
