"""Oracles and the case file (SPEC §4, seed 000): the catalog of persona prompts, notes,
the case context, and consultations."""
