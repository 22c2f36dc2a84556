"""Scoring: a study run's saved calibration (:mod:`.artifact`) applied to every item of a verdict table
(:mod:`.apply`), with per-dataset summaries (:mod:`.summary`)."""
