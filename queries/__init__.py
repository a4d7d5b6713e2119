"""Read-side queries over a dataset's catalog, for the command line and the browser view: versions and their
lineage (`versions`), one version's items with their review state (`browse`), and exports to other formats
and hubs (`export`). Nothing here writes a stage's tables."""
