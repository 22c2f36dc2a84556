"""Labels where they pay: which items to label next (``judgecal label select``), prediction-powered estimates once
the labels return (``judgecal label estimate``) and what to run and buy next (``judgecal advise``).

The commands sit above the studies (advise reads the inclusion machinery) and below the CLI; the estimators and
samplers they apply are plain numpy in :mod:`judgecal_dist.methods.labels`, so the notebook API shares them.
"""
