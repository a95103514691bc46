# Multi-stage build: a static aileron binary on a minimal, non-root image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/aileron ./cmd/aileron && mkdir -p /out/home

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/aileron /usr/local/bin/aileron
COPY --from=build --chown=65532:65532 /out/home /var/lib/aileron
# proxy_url names AILERON_PROXY__ADVERTISE: the host:port sandboxes reach
# the proxy at (here a compose service named "aileron"; override it).
# Metrics for a Prometheus in another container on 9092 (GET /metrics, and
# /healthz and /readyz for a load balancer: only those).
ENV AILERON_HOME=/var/lib/aileron \
    AILERON_PROXY__LISTEN=0.0.0.0:9080 \
    AILERON_PROXY__ADVERTISE=aileron:9080 \
    AILERON_ADMIN__METRICS_LISTEN=0.0.0.0:9092
USER nonroot:nonroot
VOLUME ["/var/lib/aileron"]
EXPOSE 9080 9092
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s CMD ["/usr/local/bin/aileron", "health"]
ENTRYPOINT ["/usr/local/bin/aileron"]
CMD ["daemon"]
