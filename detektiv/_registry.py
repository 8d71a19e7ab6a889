"""What Inspect AI loads from the `inspect_ai` entry point: importing these registers them."""

from detektiv.scorer import contradicted_share, examination, held_share
from detektiv.task import hallucinations

__all__ = ["contradicted_share", "examination", "hallucinations", "held_share"]
