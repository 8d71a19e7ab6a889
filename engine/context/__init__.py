"""The context manager (SPEC §5): every prompt fits the window of the provider receiving it;
conversations and `last_reference` persist.

- `budget`: windows (configured, discovered, default), exact counts or estimates, `fit`.
- `fit`: the pure planning of rounds into a limit (digests, even shortening).
- `tokens`: the estimate.
- `conversations`, `policy`, `reference`: turns, `context.toml`, the last entity talked about.
"""
