"""The state store, a leaf of the package: schema, engine and migrations, writing ingested rows."""
