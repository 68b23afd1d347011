"""Test doubles that fail loudly on unexpected calls (no mocks): see scripted_server.py."""
