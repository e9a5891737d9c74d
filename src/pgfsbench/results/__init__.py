"""The results store and its schema."""
