"""The ``slurm_cluster`` fixture: a real Slurm that answers, or a skip (a failure in CI).

Tests that need Slurm take ``slurm_cluster``.  Without a cluster they are skipped
with the reason, unless ``SGSBATCH_REQUIRE_SLURM=1`` is set (as .ci/run does), in
which case they fail: CI must never pass by skipping the Slurm tier.
"""

from __future__ import annotations

import pytest
from helpers import REQUIRE_ENV, SlurmCluster, probe_cluster, slurm_required


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    found = probe_cluster()
    if isinstance(found, SlurmCluster):
        return found
    if slurm_required():
        pytest.fail(f"{REQUIRE_ENV} is set but there is no Slurm cluster: {found}", pytrace=False)
    pytest.skip(f"no Slurm cluster: {found}; set {REQUIRE_ENV}=1 to make this a failure")
