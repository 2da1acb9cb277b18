"""Rendering: the renderer registry and every output form (text tables, CSV, JSON, the HTML pages and their assets)."""
