"""modelmesh-autoscaler: skew-aware external metrics that let the HPA scale KServe ModelMesh runtimes."""

__version__ = "0.1.0"
