"""The model format family: every fitted model this project exports, as versioned JSON documents (never a pickle).

Kinds (``format`` = ``judgecal.<kind>/v<N>``; schemas and examples in ``docs/models.md``):

``judgecal.binary-pipeline/v1``  a panel's verdicts -> any aggregator -> any calibrator -> conformal thresholds
``judgecal.linear-corrector/v1``  a judge's continuous score -> the hierarchical-Bayes linear corrector per rubric
``judgecal.ot-corrector/v1``      a judge's continuous score -> the marginal optimal-transport map per rubric
``judgecal.flow-corrector/v1``    a judge's continuous score -> a neural-ODE flow (weights in a file beside it)
``judgecal.davidson/v2``          a judge's repeated A/tie/B verdicts -> Davidson's three-outcome model
``judgecal.escalation/v2``        hard variance routing from a cheap tier to a full tier
``judgecal.fcps/v1``              a judge-path prefix's joint verdicts -> the joint output table or a scalar stacker
``judgecal.flow-per-rubric/v1``   a judge's continuous score -> its rubric's own flow (one weights file per flow)

Use::

    from judgecal_dist.models import load_model, save_model, pipeline_from_estimators

    model = pipeline_from_estimators(judge_ids=..., aggregator_name="one_coin", aggregator=fitted_agg,
                                     calibrator_name="beta", calibrator=fitted_cal, settings=Settings(...))
    save_model(model, "s3://bucket/models/panel.json")
    load_model("s3://bucket/models/panel.json").predict_proba(votes)

``judgecal score --model URL`` applies any of them (a kind that reads the data table itself implements
:class:`~judgecal_dist.models.interface.TableModel`); ``judgecal fit`` and the studies export them.
"""

from typing import TYPE_CHECKING

from judgecal_dist.extras import lazy_exports

if TYPE_CHECKING:
    from judgecal_dist.models.binary import BinaryPipeline, pipeline_from_estimators
    from judgecal_dist.models.continuous import (
        Corrector,
        FlowCorrector,
        FlowPerRubricCorrector,
        LinearCorrector,
        TransportCorrector,
        flow_from_estimator,
        flows_per_rubric_from_estimators,
        linear_from_conjugate,
        linear_from_hb,
        linear_from_moments,
        ot_from_estimators,
    )
    from judgecal_dist.models.documents import KINDS, schemas
    from judgecal_dist.models.fcps import FCPSModel, fcps_from_estimator
    from judgecal_dist.models.files import (
        LEGACY_FILE,
        MODEL_FILE,
        load_model,
        model_document,
        model_from_dict,
        save_model,
    )
    from judgecal_dist.models.interface import TableModel

# Imported on first use: applying one kind imports that kind's code only.
_HOMES = {
    "BinaryPipeline": "judgecal_dist.models.binary",
    "pipeline_from_estimators": "judgecal_dist.models.binary",
    "Corrector": "judgecal_dist.models.continuous",
    "FlowCorrector": "judgecal_dist.models.continuous",
    "FlowPerRubricCorrector": "judgecal_dist.models.continuous",
    "LinearCorrector": "judgecal_dist.models.continuous",
    "TransportCorrector": "judgecal_dist.models.continuous",
    "flow_from_estimator": "judgecal_dist.models.continuous",
    "flows_per_rubric_from_estimators": "judgecal_dist.models.continuous",
    "linear_from_conjugate": "judgecal_dist.models.continuous",
    "linear_from_hb": "judgecal_dist.models.continuous",
    "linear_from_moments": "judgecal_dist.models.continuous",
    "ot_from_estimators": "judgecal_dist.models.continuous",
    "KINDS": "judgecal_dist.models.documents",
    "schemas": "judgecal_dist.models.documents",
    "FCPSModel": "judgecal_dist.models.fcps",
    "fcps_from_estimator": "judgecal_dist.models.fcps",
    "LEGACY_FILE": "judgecal_dist.models.files",
    "MODEL_FILE": "judgecal_dist.models.files",
    "load_model": "judgecal_dist.models.files",
    "model_document": "judgecal_dist.models.files",
    "model_from_dict": "judgecal_dist.models.files",
    "save_model": "judgecal_dist.models.files",
    "TableModel": "judgecal_dist.models.interface",
}


__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = [
    "KINDS",
    "TableModel",
    "MODEL_FILE",
    "LEGACY_FILE",
    "BinaryPipeline",
    "pipeline_from_estimators",
    "Corrector",
    "LinearCorrector",
    "TransportCorrector",
    "FlowCorrector",
    "FlowPerRubricCorrector",
    "linear_from_hb",
    "linear_from_moments",
    "linear_from_conjugate",
    "ot_from_estimators",
    "flow_from_estimator",
    "FCPSModel",
    "fcps_from_estimator",
    "flows_per_rubric_from_estimators",
    "load_model",
    "save_model",
    "model_from_dict",
    "model_document",
    "schemas",
]
