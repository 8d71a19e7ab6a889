"""One module per tab or dialog, each beside its stylesheet."""
