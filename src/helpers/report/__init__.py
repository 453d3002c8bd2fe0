"""Tables, figures and words for reports/: saving and the manifest (reporting), computed sentences (findings), the
papers' tables (paper_tables), the notebook set-up (notebook) and the figures of notebooks 03, 05b and 06 (*_views)."""
