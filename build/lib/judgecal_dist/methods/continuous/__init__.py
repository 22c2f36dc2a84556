"""Correctors of a continuous judge score (spec 001). Nothing is imported here: the flow needs the optional
``continuous`` extra (torch) and the hierarchical model NumPyro, so each module is imported by name.

* :mod:`~judgecal_dist.methods.continuous.linear_conjugate`: closed-form OLS and the exact conjugate posterior;
* :mod:`~judgecal_dist.methods.continuous.hb_linear`: the hierarchical Bayesian linear corrector (NUTS), with the
  per-rubric choice of parametrisation in :mod:`~judgecal_dist.methods.continuous.hb_centring`;
* :mod:`~judgecal_dist.methods.continuous.score_flow`: the neural-ODE score-transport flow, whose fused drift is
  :mod:`~judgecal_dist.methods.continuous.flow_drift`;
* :mod:`~judgecal_dist.methods.continuous.score_transport`: the marginal optimal-transport (inverse-CDF) corrector.
"""
