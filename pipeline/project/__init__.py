"""The repository under test: its checkout, flopwatch.toml, the variant.toml formats, discovery, sweeps.
May import: workers."""
