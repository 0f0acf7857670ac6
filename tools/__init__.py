"""Command-line tools that work on the repository without cloud credentials."""
