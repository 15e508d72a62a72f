"""Pipelines: a stage list plus what to do before (inputs, resume) and after (merge, report)."""
