"""A trial run's ``config.yaml`` (:func:`harness.tracking.config_yaml`, issue 61): built one
top-level key at a time from texts kept between trials, it is byte for byte PyYAML's dump of
the whole config, for every trial of a sweep, in any order, and for values that only a type
tells apart."""

from __future__ import annotations

import yaml
from hydra import compose

from harness.config import to_plain
from harness.expansion import expand_suite
from harness.tracking import _YAML_DUMPER, config_yaml


def _dump(config: dict) -> str:
    return yaml.dump(config, Dumper=_YAML_DUMPER, sort_keys=False, allow_unicode=True)


def test_every_trials_config_yaml_is_the_dump_of_its_whole_config(hydra_conf):
    trials = []
    for cli in (["+ablation=knowledge_forms"], ["+ablation=smoke"]):
        trials += [t for _, ts in expand_suite(compose(config_name="config", overrides=cli), cli) for t in ts]
    configs = [to_plain(t.config) for t in trials]
    for config in configs + configs[::-1]:  # texts kept from earlier trials, both ways round
        assert config_yaml(config) == _dump(config)
    for trial in trials + trials[::-1]:  # the config objects, their shared groups dumped once
        assert config_yaml(trial.config) == _dump(to_plain(trial.config))
    assert len({config_yaml(c) for c in configs}) == len({_dump(c) for c in configs}) > 100


def test_values_equal_but_for_their_type_keep_their_own_text():
    configs = [{"seed": 1, "train": {"lr": 1, "tags": [], "note": "ü " * 60}},
               {"seed": 1.0, "train": {"lr": 1.0, "tags": [], "note": "ü " * 60}},
               {"seed": "1", "train": {"lr": True, "tags": {}, "note": None}},
               {}]
    for config in configs * 2:
        assert config_yaml(config) == _dump(config)
