# The modelmesh-autoscaler image: the adapter (`modelmesh-autoscaler serve`) and the exporter sidecar
# (`modelmesh-exporter`) from one Python package. Published as
# ghcr.io/modelmesh-autoscaler/modelmesh-autoscaler:<version>-<commit>; manifests/ refer to it. Give every build a tag
# of its own (or deploy by digest): a tag pushed again with new code keeps the old code running on every node that
# cached it, as the manifests pull `IfNotPresent` (docs/operations.md, Upgrading). REVISION is the commit the
# image is built from: `--version` and the `*_build_info` series say it ("unknown" without it).
#   REVISION=$(git rev-parse --short=12 HEAD)
#   docker build --build-arg REVISION=$REVISION -t ghcr.io/modelmesh-autoscaler/modelmesh-autoscaler:0.1.0-$REVISION .

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY exporter ./exporter
COPY autoscaler ./autoscaler
ARG REVISION=unknown
# Read by exporter/build_info.py: the package data pyproject.toml ships (a checkout has no such file, and asks git).
RUN printf '%s\n' "$REVISION" > exporter/REVISION
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
