"""toy_sizes: plain-torch stand-ins for a kernel package."""
