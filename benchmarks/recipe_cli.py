"""The command line shared by ``recipe.py`` (decoders) and ``encoder_recipe.py`` (encoders): the common options
and the choice of recipes by name."""
from __future__ import annotations

import argparse
from typing import Mapping


def recipe_parser(doc: str | None, default_recipes: str) -> argparse.ArgumentParser:
    """A parser with the options both recipe scripts take; each script adds its own."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--recipes", default=default_recipes, help="comma-separated names, or 'all'")
    ap.add_argument("--table-only", action="store_true", help="print the recipes already trained; train nothing")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    ap.add_argument("--list", action="store_true", help="list the recipes and exit")
    return ap


def chosen_recipes(args: argparse.Namespace, recipes: Mapping[str, tuple[str, dict]]) -> list[str] | None:
    """The recipe names ``--recipes`` asks for (all with ``all``); ``None`` after printing them for ``--list``.
    An unknown name stops the script with the list of known ones."""
    if args.list:
        width = max(len(n) for n in recipes) + 2
        for name, (what, _) in recipes.items():
            print(f"{name:<{width}} {what}")
        return None
    names = list(recipes) if args.recipes == "all" else args.recipes.split(",")
    unknown = [n for n in names if n not in recipes]
    if unknown:
        raise SystemExit(f"unknown recipe(s) {unknown}; choose from {', '.join(recipes)} (--list describes them)")
    return names
