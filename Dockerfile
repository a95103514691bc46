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
ENV AILERON_HOME=/var/lib/aileron \
    AILERON_PROXY__LISTEN=0.0.0.0:9080
USER nonroot:nonroot
VOLUME ["/var/lib/aileron"]
EXPOSE 9080
ENTRYPOINT ["/usr/local/bin/aileron"]
CMD ["daemon"]
