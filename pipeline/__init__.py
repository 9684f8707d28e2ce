"""flopwatch driver: CLI, configuration, discovery, planning, Ray execution, store, statistics."""
