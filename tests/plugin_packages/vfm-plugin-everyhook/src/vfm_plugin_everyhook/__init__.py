"""Registers one marker object per hook; the tests look each up by name."""
