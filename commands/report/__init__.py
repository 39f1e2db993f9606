"""The offline HTML report and its inline SVG charts."""
