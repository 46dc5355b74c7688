"""The run configuration: schema (typed, frozen, reference defaults), loading (TOML, inherit, --set), smoke."""
