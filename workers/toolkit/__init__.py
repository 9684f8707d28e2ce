"""Build inputs and source helpers below bindings and back ends: bundles, include folders, hints, symbols.
May import: workers.core."""
