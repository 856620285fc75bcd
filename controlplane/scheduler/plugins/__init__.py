"""The scheduler's plugins, one module each with the same skeleton: a `NAME`, the
reasons it gives users as constants, a pure `fits()` (or score) helper that tests call
directly, the plugin class, and a factory `new(args, handle)` that the registry
(`config.REGISTRY`) maps the name to."""
