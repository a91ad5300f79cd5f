"""migbake: turn a node profile into everything that restores a MIG layout before kubelet, every boot."""

__version__ = "0.1.0"
