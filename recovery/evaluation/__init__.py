"""Standard LIBERO evaluation: episode loop, results file with resume, statistics, parallel runner."""
