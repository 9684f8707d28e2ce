"""Derived history data kept between commands beside the build cache: per-series points, searched windows.
May import: nothing."""
