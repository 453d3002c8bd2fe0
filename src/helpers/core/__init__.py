"""Shared plumbing every stage uses: profiles and folders (config), atomic artefacts and skippable steps (artifacts),
hashes of files, text and models (digests), seeds (seeding), what the CPU/GPU offers (hardware), progress bars
(progress), intervals (stats), side-by-side jobs (parallel), inline HTML tables (html_table)."""
