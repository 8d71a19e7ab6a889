"""The response cache (SPEC §3, seed 003): normalise, the meaning guard, validation, the
stores and the matching that explains itself."""
