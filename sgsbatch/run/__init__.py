"""A run on disk: its directory layout, shard files, the run handle, checkpoint publishing, job journals."""
