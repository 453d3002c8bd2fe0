"""Shared plumbing every stage uses: profiles and folders (config), atomic artefacts and digests (artifacts), what
the CPU/GPU offers (hardware), progress bars (progress), intervals (stats), side-by-side jobs (parallel), inline HTML tables (html_table)."""
