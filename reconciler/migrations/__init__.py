"""migrations stage (see ARCHITECTURE.md)."""
