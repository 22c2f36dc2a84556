"""``judgecal fit``: choose the calibrated panel pipeline by cross-fitted NLL and export it with a model card."""
