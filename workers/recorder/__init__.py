"""A repository's benchmark script run under a recorder: the calls it makes to given entries, with their sizes.
May import: workers.isolation, workers.job."""
