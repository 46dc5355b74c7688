"""Operator commands behind the CLI: control (launch, resume, cancel, wait, watch), status, rebuild, fit."""
