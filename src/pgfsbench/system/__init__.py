"""Process running, undo journal, waits and the error hierarchy: the bottom layer."""
