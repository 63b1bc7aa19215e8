"""The one error a config check raises: it names the offending key (``config key 'grid.layers[2]': ...``)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config problem, with the dotted key that causes it. A conflict between keys (a grid setting that no model
    can take) names the key it is reported at first and the keys it conflicts with after it (``related``): the user
    may have meant to change either."""

    def __init__(self, key: str, message: str, related: tuple[str, ...] = ()):
        self.key, self.message, self.related = key, message, tuple(related)
        also = f" (with {', '.join(repr(k) for k in self.related)})" if self.related else ""
        super().__init__(f"config key '{key}'{also}: {message}")

    @property
    def keys(self) -> tuple[str, ...]:
        """The key first, then the keys it conflicts with."""
        return (self.key, *self.related)

    def __reduce__(self):
        # rebuilt from its arguments, so it crosses process boundaries (a worker's error reaches its pool)
        return type(self), (self.key, self.message, self.related)


def key_path(path) -> str:
    """A JSON path (keys and list indices) as a dotted key: ['models', 0, 'name'] -> 'models[0].name'."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def set_by(key: str, files) -> str | None:
    """The config file (of ``files``, merged in that order, the last winning) that sets ``key``'s top-level section
    (``grid`` of ``grid.layers[0]``, ``models`` of ``models[1].context``), or None where none does (the default's)."""
    import re

    import yaml

    top = re.split(r"[.\[]", key, maxsplit=1)[0]
    for path in reversed([str(f) for f in files]):
        try:
            with open(path) as f:
                raw = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(raw, dict) and top in raw:
            return path
    return None


def for_the_user(err: ConfigError, files) -> str:
    """One line for a person: the file that sets the key (where one does), then the error."""
    where = set_by(err.key, files)
    return f"{where}: {err}" if where else str(err)
