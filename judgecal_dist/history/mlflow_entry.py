"""Models-from-code entry of the pyfunc flavour: MLflow copies this file into a logged model and runs it at load.

It only names the python model (:class:`~judgecal_dist.history.mlflow_model.JudgecalPyfunc`); the model itself is
the JSON document logged beside it, so nothing of ours is pickled.
"""

from mlflow.models import set_model

from judgecal_dist.history.mlflow_model import JudgecalPyfunc

set_model(JudgecalPyfunc())
