"""daemon stage (see ARCHITECTURE.md)."""
