"""The state database: schema, engine and migrations, ingestion."""
