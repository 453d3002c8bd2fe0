"""The HTML tables the notebooks show inline (sample stories, instruct stories, themed-suite answers): one builder."""
from __future__ import annotations

from typing import Sequence


def styled_table(cls: str, head: Sequence[str], rows: Sequence[str], caption: str = "", cell_css: str = "",
                 th_css: str = "", tail_css: str = "", font_px: int = 12, border: str = "#bbb", pad_px: int = 5,
                 caption_css: str = "") -> str:
    """A ``<table class="cls">`` with its own ``<style>``: collapsed 1 px borders (``border``), sans-serif at
    ``font_px``, cells padded and top-left aligned (plus ``cell_css``), grey header cells (then ``th_css`` rules),
    the caption above the table (plus ``caption_css``; then ``tail_css`` rules). ``head`` and ``rows`` are ready-made
    ``<th>`` cells and ``<tr>`` rows; ``caption`` is a ready-made ``<caption>`` (or empty)."""
    t = f"table.{cls}"
    style = (f"<style>{t}{{border-collapse:collapse;font-family:sans-serif;font-size:{font_px}px}}"
             f"{t} td,{t} th{{border:1px solid {border};padding:{pad_px}px;vertical-align:top;text-align:left;{cell_css}}}"
             f"{t} th{{background:#f3f3f3}}{th_css}"
             f"{t} caption{{caption-side:top;text-align:left;padding:6px 0{caption_css}}}{tail_css}</style>")
    return f'{style}<table class="{cls}">{caption}<thead><tr>{"".join(head)}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
