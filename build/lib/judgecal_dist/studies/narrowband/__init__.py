"""The synthetic narrow-band ablation (spec 000 §5.6(a)): log-odds weighting vs pruning as the accuracy spread
grows. One module, :mod:`.study`.
"""
