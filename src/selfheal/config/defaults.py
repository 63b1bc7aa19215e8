"""Every key's default, as the schema gives it (``schema.yaml``'s ``default:``, the one place a default is written;
``schema.defaults`` reads them). Meanings: docs/configuration.md."""

from __future__ import annotations

from selfheal.config.schema import defaults

DEFAULTS: dict = defaults()
MODEL_DEFAULTS: dict = defaults("models")
