"""UpdateFeatures rules on the controller (Kafka's FeatureControlManager), deterministic."""

from __future__ import annotations

import random

import pytest
from pylog.protocol.errors import ErrorCode

from pylog.cluster import features
from pylog.cluster.controller import QuorumController
from pylog.cluster.feature_control import FeatureUpdate, UpgradeType, bootstrap_feature_records
from pylog.cluster.image import MetadataImage
from pylog.cluster.records import FeatureLevelRecord

SAFE, UNSAFE, UP = UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE, UpgradeType.UPGRADE


def controller() -> QuorumController:
    image = MetadataImage()
    for r in bootstrap_feature_records(image, features.BOOTSTRAP):
        image.apply(r)
    return QuorumController(image, rng=random.Random(1))


def update(c: QuorumController, *updates: tuple[str, int, int], validate_only: bool = False):
    result = c.update_features([FeatureUpdate(*u) for u in updates], node_id=1, validate_only=validate_only)
    return result.records, result.response


def test_bootstrap_finalizes_once() -> None:
    c = controller()
    assert dict(c.image.features) == dict(features.BOOTSTRAP)
    assert bootstrap_feature_records(c.image, features.BOOTSTRAP) == []


@pytest.mark.parametrize(
    ("updates", "reason"),
    [
        ((("transaction.version", 2, UP),), "Local controller 1 does not support this feature."),
        ((("share.version", 2, UP),), "only supports versions [0, 1]"),
        ((("no.such.feature", 1, UP),), "does not support this feature"),
        ((("group.version", 0, UP),), "without setting the upgrade type"),
        ((("group.version", -1, SAFE),), "cannot be less than 0"),
        ((("metadata.version", 28, UP),), "without setting the upgrade type"),
        ((("metadata.version", 22, SAFE),), "might delete metadata information"),
        ((("metadata.version", 22, UNSAFE),), "Unsafe metadata downgrade is not supported"),
        ((("metadata.version", 26, SAFE),), "share.version could not be set to 1"),
        ((("group.version", 1, 9),), "does not support the given upgrade type"),
        ((("group.version", 0, SAFE), ("share.version", 7, UP)), "share.version"),
    ],
)
def test_refused_updates_write_nothing(updates: tuple, reason: str) -> None:
    c = controller()
    records, result = update(c, *updates)
    assert records == ()
    assert result.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert reason in (result.error_message or "")
    assert dict(c.image.features) == dict(features.BOOTSTRAP)


def test_downgrades_and_upgrades() -> None:
    c = controller()
    records, result = update(c, ("share.version", 0, SAFE), ("metadata.version", 26, SAFE))
    assert result.error_code == 0
    assert records == (FeatureLevelRecord("share.version", 0), FeatureLevelRecord("metadata.version", 26))
    assert dict(c.image.features) == {  # level 0: gone
        "metadata.version": 26,
        "group.version": 1,
        "streams.version": 1,
    }
    # share.version 1 needs metadata.version 27 again
    assert "depends on metadata.version level 27" in (
        update(c, ("share.version", 1, UP))[1].error_message or ""
    )
    _, result = update(c, ("metadata.version", 29, UP), ("share.version", 1, UP))
    assert result.error_code == 0 and dict(c.image.features) == dict(features.BOOTSTRAP)
    # validate_only: the answer, no records
    records, result = update(c, ("group.version", 0, SAFE), validate_only=True)
    assert result.error_code == 0 and records == () and c.image.features["group.version"] == 1


def test_an_inactive_controller_answers_not_controller() -> None:
    c = controller()
    c.deactivate()
    _, result = update(c, ("group.version", 0, SAFE))
    assert result.error_code == ErrorCode.NOT_CONTROLLER
