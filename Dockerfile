# The modelmesh-autoscaler image: the adapter (`modelmesh-autoscaler serve`) and the exporter sidecar
# (`modelmesh-exporter`) from one Python package. Published as
# ghcr.io/modelmesh-autoscaler/modelmesh-autoscaler:<version>; manifests/ refer to it.
#   docker build -t ghcr.io/modelmesh-autoscaler/modelmesh-autoscaler:0.1.0 .

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY exporter ./exporter
COPY autoscaler ./autoscaler
# The pod-resources extra (grpcio) lets the sidecar ask the kubelet for its own GPUs when that opt-in patch is
# applied (manifests/examples/exporter-pod-resources-patch.yaml).
RUN pip install --no-cache-dir --root-user-action=ignore --prefix=/install ".[pod-resources]"

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /install /usr/local
# A fixed numeric non-root user, so that `runAsNonRoot` can check it (manifests run it as 65532).
RUN groupadd --system --gid 65532 app \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin app
USER 65532:65532
# 6443: the adapter's HTTPS API; 9187: the exporter's /metrics.
EXPOSE 6443 9187
CMD ["modelmesh-autoscaler", "serve"]
