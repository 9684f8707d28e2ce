"""Rendering: the static HTML site and markdown from the plain records it is handed.
May import: workers.core, workers.cuda, workers.ops, workers.rocm."""
