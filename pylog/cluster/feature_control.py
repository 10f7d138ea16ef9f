"""UpdateFeatures on the controller (sans-IO): Kafka's FeatureControlManager rules.

A request is all or nothing: the first update that fails fails the whole request with
INVALID_UPDATE_VERSION and the reason, and nothing is written. An update must name a level this
node supports (pylog nodes of one version support the same levels); raising a level needs
upgrade type UPGRADE, lowering one SAFE_DOWNGRADE or UNSAFE_DOWNGRADE. A feature's dependencies
(share.version 1 needs metadata.version 27) are checked against the levels the request would leave,
and so is lowering metadata.version under a finalized feature that needs it. Lowering
metadata.version across a level that changed the metadata format is refused, as Kafka refuses it
(unsafe downgrades are not implemented there either).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pylog.cluster.features import (
    DEPENDENCIES,
    KRAFT_VERSION,
    METADATA_VERSION,
    MINIMUM_METADATA_VERSION,
    SUPPORTED,
    metadata_changed_between,
    release_name,
)
from pylog.cluster.image import MetadataImage
from pylog.cluster.records import FeatureLevelRecord, MetadataRecord
from pylog.protocol.errors import ErrorCode


class UpgradeType(enum.IntEnum):
    """UpdateFeatures ``upgrade_type`` (v1+)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True)
class FeatureUpdate:
    feature: str
    max_version_level: int
    upgrade_type: int = UpgradeType.UPGRADE


@dataclass(frozen=True)
class FeatureUpdateResult:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


class _Refused(Exception):
    pass


def bootstrap_feature_records(image: MetadataImage, levels: Mapping[str, int]) -> list[MetadataRecord]:
    """The records that finalize ``levels`` on a cluster whose log has no metadata.version yet
    (a new cluster, or one written before pylog recorded features)."""
    if METADATA_VERSION in image.features:
        return []
    return [FeatureLevelRecord(name, level) for name, level in sorted(levels.items())]


def update_features(
    image: MetadataImage, updates: Sequence[FeatureUpdate], node_id: int
) -> tuple[list[MetadataRecord], FeatureUpdateResult]:
    """Records for ``updates`` (none when one of them fails) and the request's result."""
    names = [u.feature for u in updates]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        return [], FeatureUpdateResult(ErrorCode.INVALID_REQUEST, f"Duplicate feature update for {dup}")
    proposed = dict(image.features)
    proposed.update({u.feature: u.max_version_level for u in updates})
    records: list[MetadataRecord] = []
    try:
        for u in updates:
            records.append(_update_one(image, u, proposed, node_id))
        if any(u.feature == METADATA_VERSION for u in updates):
            _check_dependents(proposed)
    except _Refused as e:
        message = f"The update failed for all features since the following feature had an error: {e}"
        return [], FeatureUpdateResult(ErrorCode.INVALID_UPDATE_VERSION, message)
    return records, FeatureUpdateResult()


def _update_one(
    image: MetadataImage, u: FeatureUpdate, proposed: Mapping[str, int], node_id: int
) -> FeatureLevelRecord:
    name, new = u.feature, u.max_version_level

    def refuse(reason: str) -> _Refused:
        return _Refused(f"Invalid update version {new} for feature {name}. {reason}")

    if u.upgrade_type not in (UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE):
        raise refuse("The controller does not support the given upgrade type.")
    current = image.features.get(name, 0)
    if new < 0:
        raise refuse("A feature version cannot be less than 0.")
    lo, hi = SUPPORTED.get(name, (0, 0))
    if not lo <= new <= hi:
        what = f"Local controller {node_id}"
        raise refuse(
            f"{what} does not support this feature."
            if hi == 0
            else f"{what} only supports versions [{lo}, {hi}]"
        )
    if new < current and u.upgrade_type == UpgradeType.UPGRADE:
        raise refuse(
            "Can't downgrade the version of this feature without setting the upgrade type to either "
            "safe or unsafe downgrade."
        )
    if new > current and u.upgrade_type != UpgradeType.UPGRADE:
        raise refuse("Can't downgrade to a newer version.")
    if name == KRAFT_VERSION:
        raise refuse(
            "kraft.version is chosen when the controllers' storage is formatted (`pylog storage "
            "format --standalone` or `--initial-controllers`) and cannot be changed while running."
        )
    if name == METADATA_VERSION:
        _check_metadata_version(current, new, u.upgrade_type)
    elif name not in SUPPORTED:
        raise refuse(f"Feature {name} not found.")
    else:
        _check_dependencies(name, new, proposed)
    return FeatureLevelRecord(name, new)


def _check_metadata_version(current: int, new: int, upgrade_type: int) -> None:
    def refuse(reason: str) -> _Refused:
        return _Refused(f"Invalid metadata.version {new}. {reason}")

    if new < MINIMUM_METADATA_VERSION:
        raise refuse(f"Unable to set a metadata.version less than {release_name(MINIMUM_METADATA_VERSION)}")
    if new < current and metadata_changed_between(current, new):
        if upgrade_type == UpgradeType.UNSAFE_DOWNGRADE:
            raise refuse("Unsafe metadata downgrade is not supported in this version.")
        raise refuse(
            "Refusing to perform the requested downgrade because it might delete metadata information."
        )


def _check_dependencies(name: str, level: int, proposed: Mapping[str, int]) -> None:
    for dep, needed in DEPENDENCIES.get((name, level), {}).items():
        if proposed.get(dep, 0) < needed:
            raise _Refused(
                f"Invalid update version {level} for feature {name}. {name} could not be set to {level} "
                f"because it depends on {dep} level {needed}"
            )


def _check_dependents(proposed: Mapping[str, int]) -> None:
    """A lower metadata.version must still satisfy every finalized feature that needs it."""
    for name, level in sorted(proposed.items()):
        if name != METADATA_VERSION and level > 0:
            _check_dependencies(name, level, proposed)
