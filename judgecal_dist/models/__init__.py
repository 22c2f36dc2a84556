"""The model format family: every fitted model this project exports, as versioned JSON documents (never a pickle).

Kinds (``format`` = ``judgecal.<kind>/v<N>``; schemas and examples in ``docs/models.md``):

``judgecal.binary-pipeline/v1``  a panel's verdicts -> any aggregator -> any calibrator -> conformal thresholds

Use::

    from judgecal_dist.models import load_model, save_model, pipeline_from_estimators

    model = pipeline_from_estimators(judge_ids=..., aggregator_name="one_coin", aggregator=fitted_agg,
                                     calibrator_name="beta", calibrator=fitted_cal, settings=Settings(...))
    save_model(model, "s3://bucket/models/panel.json")
    load_model("s3://bucket/models/panel.json").predict_proba(votes)

``judgecal score --model URL`` applies any of them; ``judgecal fit`` and the studies export them.
"""

from judgecal_dist.models.binary import BinaryPipeline, pipeline_from_estimators
from judgecal_dist.models.documents import KINDS, schemas
from judgecal_dist.models.files import LEGACY_FILE, MODEL_FILE, load_model, model_document, model_from_dict, save_model

__all__ = [
    "KINDS",
    "MODEL_FILE",
    "LEGACY_FILE",
    "BinaryPipeline",
    "pipeline_from_estimators",
    "load_model",
    "save_model",
    "model_from_dict",
    "model_document",
    "schemas",
]
