"""flopwatch rendering: static HTML site and markdown from stored results."""
