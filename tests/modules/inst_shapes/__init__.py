"""Fixture package for the instrument, importer and transparency tests: every shape of callable."""
