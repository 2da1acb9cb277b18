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

    def as_args(self, *, absolute_configs: bool = False, for_people: bool = False) -> list[str]:
        """These options as command-line words `autonvtx run` (and suggest, profile) reads back,
        each `--option=value` so that a value starting with "-" stays a value, or, `for_people`,
        as a person types them (`-t VALUE`); `absolute_configs`: config paths made absolute (for
        a process in another directory)."""
        import os

        configs = [os.path.abspath(path) for path in self.configs] if absolute_configs else self.configs
        words: list[str] = []
        for flag, values in (
            ("--config", configs),
            ("--preset", self.presets),
            ("-t" if for_people else "--target", self.targets),
            ("--include", self.includes),
            ("--exclude", self.excludes),
            ("--engine", () if self.engine is None else (self.engine,)),
        ):
            for value in values:
                words += [flag, value] if for_people else [f"{flag}={value}"]
        return words

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
