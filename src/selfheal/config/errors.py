"""The one error a config check raises: it names the offending key (``config key 'grid.layers[2]': ...``)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config problem, with the dotted key that causes it."""

    def __init__(self, key: str, message: str):
        self.key, self.message = key, message
        super().__init__(f"config key '{key}': {message}")

    def __reduce__(self):
        # rebuilt from (key, message), so it crosses process boundaries (a worker's error reaches its pool)
        return type(self), (self.key, self.message)


def key_path(path) -> str:
    """A JSON path (keys and list indices) as a dotted key: ['models', 0, 'name'] -> 'models[0].name'."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"
