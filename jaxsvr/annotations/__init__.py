"""annotations."""
