"""The command line: typer commands, one module per command family, loaded lazily."""
