"""Seeds as an axis of a comparison: one run per (arm, seed), named ``"<arm>"`` for the profile's training seed
and ``"<arm> (seed N)"`` for every other (``helpers.evaluation.comparisons.arm_and_seed`` reads the names back), so
that arms trained with the same seeds can be paired seed by seed."""
from __future__ import annotations

from typing import Mapping, Sequence


def expand_seeds(mixes: Sequence[dict], default_seed: int) -> list[dict]:
    """Mixes with a ``seeds`` list become one mix per seed (the training seed is the first-class axis of a
    comparison): ``"<name>"`` for ``default_seed`` (the profile's ``train.seed``) and ``"<name> (seed N)"`` for every
    other seed, each with its ``seed`` set, the rest of the mix unchanged. Use the same seeds in every arm of a
    comparison, so that arms can be paired seed by seed. A mix without ``seeds`` is kept as it is; two mixes that
    end with one name are refused."""
    out: list[dict] = []
    for mix in mixes:
        seeds = mix.get("seeds")
        if seeds is None:
            out.append(dict(mix))
            continue
        if "seed" in mix:
            raise ValueError(f"mix {mix['name']!r}: give either seed or seeds, not both")
        if not seeds or len(set(int(x) for x in seeds)) != len(seeds):
            raise ValueError(f"mix {mix['name']!r}: seeds must be a non-empty list of distinct integers, got {seeds!r}")
        base = {k: v for k, v in mix.items() if k != "seeds"}
        for sd in seeds:
            name = base["name"] if int(sd) == int(default_seed) else f"{base['name']} (seed {int(sd)})"
            out.append({**base, "name": name, "seed": int(sd)})
    names = [m["name"] for m in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"mixes named twice after expanding seeds: {', '.join(dup)}")
    return out


def decoder_seeds(budgets: Sequence[str], seeds: Mapping[str, Sequence[int]] | None,
                  default_seed: int) -> list[tuple[str, str, int]]:
    """``(run name, budget, seed)`` per decoder run: each budget under ``default_seed`` (named as the budget), then
    under each further seed of ``seeds[budget]`` (named ``"<budget> (seed N)"``, as :func:`expand_seeds` names
    encoder mixes). A seed list that leaves out ``default_seed`` still trains the budget under it (the run every
    later notebook reads by the budget's name); budgets in ``seeds`` that are not trained are refused."""
    seeds = dict(seeds or {})
    unknown = sorted(set(seeds) - set(budgets))
    if unknown:
        raise ValueError(f"seeds given for budgets that are not trained: {', '.join(unknown)} (budgets: {', '.join(budgets)})")
    runs = [{"name": b, "budget": b, "seeds": list(dict.fromkeys([int(default_seed), *map(int, seeds.get(b, ()))]))}
            for b in budgets]
    return [(r["name"], r["budget"], r["seed"]) for r in expand_seeds(runs, default_seed)]


# the params by which later notebooks name notebook 02's decoders (a notebook runs these models; 02b trains its own)
DECODER_PARAMS = {"03": ("models", "selfbleu_models", "generator"), "05": ("decoders",), "05b": ("models",),
                  "06": ("models",)}


def named_decoder_problems(params: Mapping[str, dict], p02: dict) -> list[str]:
    """What the notebooks' ``params`` (``{"03": {...}, ...}``) name as decoders that notebook 02 (``p02``: its
    budgets, seeds and ``train.seed``) does not train: each name must be a run of :func:`decoder_seeds` or its plain
    model (``"<budget> (plain)"``, ``"<budget> (plain) (seed N)"``); and 03's ``selfbleu_models`` must be among its
    ``models`` (whose stories it reads). One message per problem, said before anything runs."""
    if not isinstance(p02, dict):
        return []
    try:
        runs = decoder_seeds(p02.get("budgets") or [], p02.get("seeds"), int((p02.get("train") or {}).get("seed", 42)))
    except ValueError as e:  # seeds for budgets not trained: notebook 02 would stop there
        return [f"02.seeds: {e}"]
    except TypeError:  # malformed: the type checks report it
        return []
    known = {n for n, _, _ in runs} | {f"{b} (plain){n[len(b):]}" for n, b, _ in runs}
    out = []
    for nb, keys in DECODER_PARAMS.items():
        for key in keys:
            names = params.get(nb, {}).get(key)
            names = [names] if isinstance(names, str) else list(names or [])
            if missing := [n for n in names if n not in known]:
                out.append(f"{nb}.{key}: {', '.join(map(repr, missing))} not trained by notebook 02 (its runs: "
                           f"{', '.join(n for n, _, _ in runs)})")
    p03 = params.get("03", {})
    if extra := [n for n in p03.get("selfbleu_models") or [] if n not in (p03.get("models") or [])]:
        out.append(f"03.selfbleu_models: {', '.join(map(repr, extra))} not among 03.models (whose stories it reads)")
    return out
