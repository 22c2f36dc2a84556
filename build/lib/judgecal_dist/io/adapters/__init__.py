"""Adapters: one module per input format, each turning a source URL into contract tables and a counts report."""
