"""Tables, figures and words for reports/: saving and the manifest (reporting), the Markdown tables' cells
(markdown_table), computed sentences (findings), the papers' tables (paper_tables), the notebook set-up (notebook)
and the figures of notebooks 03, 05b and 06 (*_views)."""
