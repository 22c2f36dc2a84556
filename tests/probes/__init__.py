"""Probes: accidents a user or a scheduler makes (changed data, reused ids, killed runs, corrupt parts, foreign
files, hostile SQL, hostile model files), each run on real components; one module per area."""
