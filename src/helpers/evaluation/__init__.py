"""Zero-shot and fine-tuned evaluation: minimal-pair tasks and their registry (minimal_pairs), LM scoring
(lm_scoring), scoring and summaries (zero_shot), word familiarity (word_familiarity), GLUE data (glue_tasks),
fine-tuning set-up, model and runs (finetune_setup, classifier, finetune)."""
