"""Dataset loaders and generators."""
