"""The labelled panel streamed (only the labelled items' rows held, for tables beyond memory) equals the panel
read whole: same items, groups, judges, votes, labels, families and counts."""

from __future__ import annotations

import numpy as np
import pytest

from judgecal_dist.engine.jobs.panel import load_panel
from judgecal_dist.io.synthetic import generate_panel


@pytest.mark.parametrize("orientation", ["natural", "randomized"])
def test_streamed_panel_equals_the_whole_read(tmp_path, orientation):
    url = str(tmp_path / "panel")
    generate_panel(url, n_items=3000, n_judges=7, seed=3, label_fraction=0.1, missing_rate=0.2)
    whole = load_panel(url, orientation=orientation, orientation_seed=4)
    streamed = load_panel(url, orientation=orientation, orientation_seed=4, scan=True)
    assert streamed.n_items == whole.n_items < 3000
    for name in ("item_ids", "group_keys", "judge_ids", "votes", "labels", "families"):
        np.testing.assert_array_equal(getattr(streamed, name), getattr(whole, name), err_msg=name)
    assert streamed.info == whole.info
    assert streamed.dataset == whole.dataset
