"""GGUF models to run locally: what a file says about itself, the catalogue, the store of
pulled models and the pull from the Hugging Face Hub (SPEC §9)."""
