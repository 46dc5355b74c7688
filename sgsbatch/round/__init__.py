"""round."""
