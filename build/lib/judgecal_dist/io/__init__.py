"""Readers, writers, validation and adapters: the only layer that parses files and checks data contracts."""
