"""The browser view of a dataset version (`earmark view`): earmark.view.server."""
