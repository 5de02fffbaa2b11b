"""The MLSys 2026 fusion problem family."""
