"""Estimators and samplers for labelling with a calibrated panel as the proxy: prediction-powered means (PPI++,
the inverse-probability form for actively drawn labels, the classical interval beside them) and the inclusion
probabilities that decide which items are labelled next. Plain numpy, sklearn-style; the commands in
:mod:`judgecal_dist.labels` and the notebook API apply the same objects.
"""
