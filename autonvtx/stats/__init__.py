"""The statistics model: a row per range (or call path) of a recording, its Python twin, and the one view over any table's rows."""
