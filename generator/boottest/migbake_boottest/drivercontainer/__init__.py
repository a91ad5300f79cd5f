"""A simulated NVIDIA driver container in the boot-test guest, the GPU plugins that wait for MIG, and their claims."""
