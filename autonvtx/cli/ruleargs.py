"""What the rule options say (--config, --preset, -t, --include, --exclude, --engine), as one
value, whoever parsed them: click (`cli.options.rule_options`) or `autonvtx run`'s own parser
(`cli.runargs`), which must not load click."""

from __future__ import annotations

from autonvtx.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from autonvtx.config import Config


class RuleArgs(Value):
    """What the rule options say, handed to a command as one `rules` argument."""

    __slots__ = ("configs", "presets", "targets", "includes", "excludes", "engine")
    configs: tuple[str, ...]
    presets: tuple[str, ...]
    targets: tuple[str, ...]
    includes: tuple[str, ...]
    excludes: tuple[str, ...]
    engine: str | None

    def __init__(
        self,
        configs: tuple[str, ...] = (),
        presets: tuple[str, ...] = (),
        targets: tuple[str, ...] = (),
        includes: tuple[str, ...] = (),
        excludes: tuple[str, ...] = (),
        engine: str | None = None,
    ) -> None:
        self._set(configs, presets, targets, includes, excludes, engine)

    def load(self, captures: Sequence[str] = (), near: str | None = None) -> Config:
        """The config from presets, config files (or discovery), the -t rule and --engine;
        `captures`: `run --capture` windows; `near`: the script's directory (discovery)."""
        from autonvtx.configfile import load_rules

        return load_rules(
            self.configs,
            presets=self.presets,
            targets=self.targets,
            includes=self.includes,
            excludes=self.excludes,
            engine=self.engine,
            captures=captures,
            near=near,
        )
