"""Critics: execution-quality metrics (local, global) and value / temporal value-risk critics."""
