"""The round between its phases: reading it back, training examples, lifecycle, weights, metrics."""
