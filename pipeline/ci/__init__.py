"""What runs in GitHub Actions and talks to GitHub: the PR gate, the comment publisher, settings checks.
May import: nothing.

Standard library only: the PR gate runs from a checkout of the default branch with nothing installed.
"""
