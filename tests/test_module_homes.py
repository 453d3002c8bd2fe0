"""One concept per helpers module: the names that left ``judge.py``, ``story_eval.py``, ``diversity.py``,
``evaluation.py``, ``training.py``, ``finetune.py`` and ``compressor.py`` each have one home, are importable from it, and
are defined in no other helpers module (no re-export shims)."""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parents[1] / "src" / "helpers"


def _modules() -> dict[str, Path]:
    """Every helpers module by its dotted name below ``helpers`` (``"data.corpora"``), package ``__init__`` files aside."""
    return {".".join(p.relative_to(HELPERS).with_suffix("").parts): p for p in sorted(HELPERS.rglob("*.py"))
            if p.name != "__init__.py"}

# where each moved public name lives now (judge.py kept the rubric, prompts, parsing and cache; story_eval.py the
# GPT-Eval prompts and the themed suites; training.py the loop, recipes.py the run plans, launch.py the torchrun and job-array CLI ``main``;
# finetune.py the runs, the cache and the result rows; compressor.py the model and its pair sampler)
HOMES = {
    "judge.client": ["JudgeConfig", "JudgeClient"],
    "judge.local": ["LOCAL_PACKAGE", "LOCAL_GGUF", "LOCAL_INSTALL", "local_judge_dir", "LocalJudgeConfig",
                    "grade_distribution", "expected_and_argmax", "load_local_judge", "LocalJudgeClient"],
    "judge.runs": ["JUDGE_BACKENDS", "make_client", "grade_completions", "judge_config", "judge_prompt_ids",
                   "judge_items", "judge_summary", "LOCAL_THEMED_NOTE", "judge_themed_answers"],
    "story_eval.folding": ["ascii_quotes", "fold", "tokens", "folded"],
    "story_eval.instruct": ["INSTRUCT_PROMPTS", "INSTRUCT_FIELDS", "DERIVED_FIELDS", "STOPWORDS", "FEATURE_RULES", "FEATURE_NOTES",
                 "detect_features", "candidate_words", "InstructDocument", "split_list", "build_instruct_document",
                 "instruct_documents", "ParsedInstruct", "parse_instruct", "word_used", "required_word_share",
                 "load_instruct_prompts", "instruct_scores", "instruct_summary", "InstructRun", "field_counts",
                 "heldout_split", "plan_instruct", "heldout_instruct_prompts", "bundled_instruct_prompts", "unscored_notes"],
    # the former helpers.diversity: self-BLEU, ROUGE, the n-gram index, memorisation, loops/endings; intervals to stats
    "diversity.self_bleu": ["PAPER_KS", "BERTTIME_CODE_KS", "DEFAULT_WEIGHTS", "LEVELS", "self_bleu", "self_bleu_per_prompt",
                  "self_bleu_curve", "self_bleu_table", "self_bleu_nltk", "choose_k_or_none", "choose_k", "k_choices"],
    "diversity.rouge": ["Tokenizer", "rouge_tokenize", "rouge2", "rouge_n_matrix", "rouge2_pairs", "max_pairwise_rouge2"],
    "diversity.ngram_index": ["Match", "SharedRun", "NGramIndex", "longest_common_substring_words"],
    "diversity.memorisation": ["max_rouge2_train", "NAME", "corpus_names", "mask_names", "template_matches",
                               "memorisation_rows"],
    "diversity.continuation_health": ["continuation_health", "health_table"],
    # repetition measured in diversity, trained away in training (sequence-level unlikelihood fine-tuning of the
    # decoders, a training loop); the loop test both use is a text statistic of the data stage
    "data.text_stats": ["repeated_run"],
    "training.unlikelihood": ["UnlikelihoodConfig", "UnlikelihoodResult", "repeated_ngram_mask", "unlikelihood_loss",
                               "probe", "finetune", "finetune_decoder", "history_rows", "phase_lr", "phase_prompts",
                               "finetune_planned", "finetune_decoders", "used_valid_losses", "healthier_probe"],
    "core.stats": ["bootstrap_mean_interval", "wilson_interval", "intervals_apart", "binomial_replicates"],
    # one home each for seeding, digests and atomic writes (the review of the core package): every global seed,
    # every hash and every artefact write goes through these
    "core.seeding": ["seed_everything", "generator"],
    "core.digests": ["sha256_file", "sha256_stream", "bytes_digest", "text_digest", "files_digest", "model_files_digest",
                     "model_digest", "WEIGHT_FILES", "MODEL_FILES"],
    "core.artifacts": ["atomic_path", "write_text", "write_json", "write_jsonl", "append_jsonl", "save_pretrained_atomic",
                       "fingerprint"],
    "core.config": ["read_yaml"],
    # evaluation.py kept pairs -> rows, summaries, the top level and the paper comparison; minimal_pairs.TASKS and
    # TASK_NAMES are not listed because finetune has its own (the GLUE tasks), another concept with the same names
    "evaluation.minimal_pairs": ["DATA_DIRS", "BLIMP_PHENOMENA", "SUPPLEMENT_NAMES", "ewok_domain_name", "Item", "load_blimp",
                      "load_supplement", "load_ewok", "MinimalPairTask", "TASK_REGISTRY", "load_task", "task_files",
                      "load_pair_files", "pair_file_task", "task_display"],
    "evaluation.lm_scoring": ["causal_scores", "mlm_batches", "mlm_scores"],
    "evaluation.zero_shot": ["SCORING_VERSION", "tie_coin", "Scorer", "score_items", "BOOTSTRAP_SAMPLES", "paradigm_mean_interval",
                   "summarise", "EvalSettings", "EvalResult", "chance_verdict", "interval_table", "average_note",
                   "tokenizer_digest", "make_scorer", "evaluate_model", "PAPER_BENCHMARKS",
                   "paper_authors_row", "paper_ewok_has_context", "compare_with_paper", "evaluate_saved",
                   "evaluate_many"],
    "training.recipes": ["encode_blocks", "blocks_digest", "train_or_skip", "train_decoder", "decoder_rows", "DecoderRun", "plan_decoders",
                "EncoderRun", "encoder_documents", "balance_blocks", "long_phase_data", "encoder_model", "plan_encoders",
                "train_encoder"],
    "evaluation.glue_tasks": ["TaskSpec", "STANDARD", "SCALED", "render", "Example", "read_rows",
                   "train_file", "load_examples", "carve_splits", "subsample", "accuracy", "f1_binary", "mcc",
                   "METRICS", "score_all", "metric_interval"],
    "evaluation.finetune_setup": ["FinetuneConfig", "finetune_config", "TaskData", "prepare_task", "data_files"],
    "evaluation.classifier": ["model_kind", "load_classifier", "encode", "pad_batch", "predict", "evaluate_examples",
                   "lr_multiplier", "FitResult", "fit"],
    "analysis.memory": ["peak_train_memory", "memory_table", "cached_memory_table", "memory_pivot"],
    # one sentence splitter for every stage (architecture.py and judge_validity.py had their own rules), one EOT and
    # one reader of its id (five modules looked it up themselves)
    "data.corpora": ["EOT"],
    "data.normalisation": ["split_sentences"],
    "data.tokenizers": ["end_of_text_id", "encode_stories", "iter_story_ids"],
    # one nucleus/greedy sampler for every model (the compressor had its own), one context-length reader, one place
    # that says where models run, one HTML table style
    "generation.decoding": ["Decoding", "sample_next", "decoding_from_name", "nested_decodings"],
    "models.decoder": ["context_length"],
    # one registry of the causal LMs (GPT-Neo, the compressor): generation and scoring load and decode through it
    "models.registry": ["ModelEntry", "REGISTRY", "model_names", "model_entry", "entry_of", "saved_entry", "load_saved",
                        "build_model", "parameter_count", "min_tokens", "own_generate"],
    # training code lives in training/: the optimiser groups and schedule beside LAMB, the compressor's training
    "training.optim": ["Lamb", "param_groups", "param_group_names", "make_optimizer", "cosine_schedule"],
    "training.compressor": ["train_compressor"],
    "training.loop": ["Placement", "placement"],
    "core.hardware": ["compute_device", "native_bf16", "resolve_precision", "autocast_context", "cpu_info"],
    "core.html_table": ["styled_table"],
    "core.parallel": ["resolve_workers", "plan_jobs", "describe_jobs", "run_jobs"],
    "report.eval_findings": ["evaluation", "story_evaluation"],
    # the sentences of each notebook's summary live with the other sentences of its stage
    "report.architecture_findings": ["sweep", "blimp_intervals", "contrastive", "sweep_caveat", "power_law",
                                     "compressor", "memory"],
    "report.interpret_findings": ["attention_heads", "specialists", "head_lines", "paper_pattern",
                                  "specialist_lines", "specialist_comparison"],
    # HTML is built in the report layer: story_eval grades, the report views render (themed colours, instruct stories)
    "report.story_views": ["colour_table_html", "highlight_words", "instruct_examples_html"],
    # the flows and table rows that left the notebooks' cells (a cell reads "compute X with a helper; show it")
    "story_eval.suites": ["coverage_row", "gpteval_completions"],
    "story_eval.instruct_files": ["instruct_completions"],
    "generation.completions": ["nested_completions", "write_generated_corpora"],
    "report.architecture_tables": ["blimp_columns", "contrastive_row", "compressor_row"],
    # figures live in the report layer: the familiarity table stays in evaluation, its figure is a view
    "report.evaluation_views": ["plot_word_familiarity"],
    # the print rule of every saved figure and the layout helpers that keep it
    "report.figure_layout": ["PRINT_WIDTH", "MIN_PRINTED_PT", "FIGURE_WIDTH", "print_problem", "smallest_printed_text",
                             "panels", "wrap", "legend_columns"],
}
SPLIT = ["judge.rubric", "judge.client", "judge.local", "judge.runs", "story_eval.folding", "story_eval.suites",
         "story_eval.instruct", "diversity.self_bleu", "diversity.rouge", "diversity.ngram_index",
         "diversity.memorisation", "diversity.continuation_health", "core.stats", "evaluation.minimal_pairs",
         "evaluation.lm_scoring", "evaluation.zero_shot", "training.loop", "training.recipes",
         "evaluation.glue_tasks", "evaluation.finetune_setup", "evaluation.classifier", "evaluation.finetune",
         "models.compressor", "analysis.memory"]
#: (name, module): the same name for another concept — ``findings.<topic>`` writes the sentences about a topic's table
UNRELATED = {("self_bleu", "report.findings"), ("continuation_health", "report.findings")}


def _defined(path: Path) -> set[str]:
    """Top-level names a module defines (functions, classes, assignments), not the ones it imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@pytest.mark.parametrize("home", sorted(HOMES))
def test_moved_names_have_one_home(home):
    mod = importlib.import_module(f"helpers.{home}")
    defined = {m: _defined(p) for m, p in _modules().items()}
    for name in HOMES[home]:
        obj = getattr(mod, name)  # importable from its home
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert obj.__module__ == f"helpers.{home}", f"{name} comes from {obj.__module__}"
        assert name in defined[home], f"{name} is not defined in helpers.{home}"
        others = sorted(m for m, names in defined.items() if name in names and m != home and (name, m) not in UNRELATED)
        assert not others, f"{name} is defined in helpers.{home} and again in {others}"


@pytest.mark.parametrize("module", SPLIT)
def test_split_modules_stay_small(module):
    n = len(_modules()[module].read_text().splitlines())
    assert n < 500, f"helpers.{module} has {n} lines: one concept per module"


def test_no_module_over_500_lines_without_a_reason():
    """Every helpers module stays under 500 lines unless its docstring says why it must not be split."""
    long = {}
    for name, path in _modules().items():
        n = len(path.read_text().splitlines())
        if n >= 500:
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            if "500-line" not in doc:
                long[name] = n
    assert not long, f"modules over 500 lines without a reason in their docstring: {long}"


#: the only imports inside functions: (module, imported package) -> why it is not in the module's header
LAZY = {
    ("runner", "papermill"): "the runner's --list/--help and parameter checks answer without the Jupyter stack",
    ("runner", "nbclient"): "as papermill",
    ("runner", "jupyter_client"): "as papermill",
    ("runner", "traitlets"): "as papermill",
    ("runner", "helpers"): "the runner's command-line checks must not pay for torch (reporting, hardware)",
    ("core.config", "torch"): "config is read by the runner and data steps that never load torch",
    ("core.digests", "torch"): "the runner, the data steps and the set-up's model-file check hash files without torch",
    ("core.integrity", "torch"): "config imports it; only a folder holding weights is loaded to check they are finite",
    ("core.integrity", "safetensors"): "as torch",
    ("core.parallel", "torch"): "a worker sets its thread count before torch is imported",
    ("core.parallel", "helpers"): "as torch: core.hardware imports it (the GPU check of workers: auto)",
    ("data.corpora", "datasets"): "only for a Hugging Face hub name, never in a default run",
    ("analysis.lexicon", "spacy"): "optional: a spaCy tagger where one is installed",
    ("core.progress", "tqdm"): "which bar (plain text or widget) depends on where it runs",
    ("analysis.memory", "resource"): "POSIX only",
    ("analysis.memory", "torch"): "the profiler's event tree is semi-private: its absence is tolerated",
    ("judge.local", "tqdm"): "silences transformers' download bars only while the judge loads",
    ("judge.local", "functools"): "as tqdm",
    ("models.ltg_bert", "importlib"): "the file is copied next to saved weights and must not need helpers",
    ("models.ltg_bert", "transformers"): "registering with the Auto classes happens on request",
    ("report.reporting", "tabulate"): "optional: Markdown tables fall back without it",
}


def test_a_module_header_shows_its_imports():
    """A module's header shows what it depends on: an import inside a function is one of :data:`LAZY`, each with
    its reason (there were 57 hidden imports before the package was split)."""
    hidden = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Import):
                        roots = [a.name.split(".")[0] for a in sub.names]
                    elif isinstance(sub, ast.ImportFrom):
                        roots = ["." if sub.level else sub.module.split(".")[0]]
                    else:
                        continue
                    hidden += [f"{name}.{node.name}: {r}" for r in roots if (name, r) not in LAZY]
    assert not hidden, hidden
