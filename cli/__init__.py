"""The command-line face: the parser and entry point (`main`), what each subcommand does (`commands`) and the
browser view (`view`)."""
