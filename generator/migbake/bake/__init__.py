"""Baking an image: the typed wrapper around the Packer binary (``packer``).

May import the foundation modules only (it runs Packer on files ``render`` wrote).
"""
