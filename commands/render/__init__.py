"""The floor every face prints with: outcomes, text renderers, the report page."""
