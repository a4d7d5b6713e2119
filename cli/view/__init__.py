"""The browser view of a dataset version (`earmark view`): earmark.cli.view.server."""
