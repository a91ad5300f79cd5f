"""Rules on where the NVIDIA driver comes from: a driver container (``checks``)."""
