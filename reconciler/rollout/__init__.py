"""rollout stage (see ARCHITECTURE.md)."""
