"""The studio's benchmark: each figure against a baseline measured in the same run."""
