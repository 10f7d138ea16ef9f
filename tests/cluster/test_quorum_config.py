"""controller.quorum.bootstrap.servers, --initial-controllers and meta.properties directory.id:
bad values are refused with a sentence naming the setting; old data directories get a directory id."""

from __future__ import annotations

from pathlib import Path

import pytest

from pylog.broker.control.metadata import load_meta_properties, read_meta_properties
from pylog.cluster.bootstrap import parse_initial_controllers, write_bootstrap_voters
from pylog.cluster.metadata_log import MetadataLogStore
from pylog.cluster.node_config import NodeSettings, parse_bootstrap_servers
from pylog.cluster.voters import decode_control, directory_id_str, parse_directory_id
from pylog.config import BrokerConfig, ConfigError


def settings(**kv: str) -> NodeSettings:
    return NodeSettings.from_config(BrokerConfig({k.replace("_", "."): v for k, v in kv.items()}))


def test_bootstrap_servers_make_a_dynamic_quorum() -> None:
    s = settings(
        node_id="4",
        process_roles="controller",
        controller_quorum_bootstrap_servers="127.0.0.1:9093,[::1]:9094",
        listeners="CONTROLLER://127.0.0.1:9095",
        controller_listener_names="CONTROLLER",
    )
    assert s.dynamic_quorum and not s.standalone
    assert s.bootstrap_servers == (("127.0.0.1", 9093), ("::1", 9094))
    with pytest.raises(ConfigError, match=r"controller\.quorum\.bootstrap\.servers entry 'nope'"):
        parse_bootstrap_servers(["nope"])
    with pytest.raises(ConfigError, match=r"controller\.listener\.names"):
        settings(node_id="4", process_roles="controller", controller_quorum_bootstrap_servers="h:1",
                 listeners="CONTROLLER://127.0.0.1:9095")


def test_initial_controllers_are_parsed_and_written_as_the_first_entry(tmp_path: Path) -> None:
    dir1 = "pbvuBlaTTwKRxS5NLJwRFQ"
    voters = parse_initial_controllers(f"1@127.0.0.1:9093:{dir1},2@[::1]:9094:{dir1[:-1]}A", "CONTROLLER")
    assert voters.ids == (1, 2) and directory_id_str(voters.voters[0].directory_id) == dir1
    with pytest.raises(ConfigError, match="id@host:port:directory-id"):
        parse_initial_controllers("1@127.0.0.1:9093", "CONTROLLER")
    with pytest.raises(ConfigError, match="twice"):
        parse_initial_controllers(f"1@h:1:{dir1},1@h:2:{dir1}", "CONTROLLER")
    write_bootstrap_voters(tmp_path, voters)
    store = MetadataLogStore(tmp_path)
    (entry,) = store.entries()
    store.close()
    assert (entry.term, entry.index) == (0, 1) and decode_control(entry.data).voters == voters
    with pytest.raises(ConfigError, match="already holds"):
        write_bootstrap_voters(tmp_path, voters)


def test_a_data_directory_without_a_directory_id_gets_one(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=abc\nnode.id=3\n")
    cluster_id, dir_id = load_meta_properties(tmp_path, 3, None)
    assert cluster_id == "abc"
    assert parse_directory_id(read_meta_properties(tmp_path)["directory.id"]) == dir_id
    assert load_meta_properties(tmp_path, 3, "abc") == (cluster_id, dir_id)  # stable from then on
    with pytest.raises(RuntimeError, match="node 3, not 4"):
        load_meta_properties(tmp_path, 4, None)
    with pytest.raises(ValueError, match="not a directory id"):
        parse_directory_id("xyz")
