"""Files on disk: atomic replacement now; the session store joins it with the interrogation."""

from engine.storage.atomic import atomic_write_bytes, atomic_write_text

__all__ = ["atomic_write_bytes", "atomic_write_text"]
