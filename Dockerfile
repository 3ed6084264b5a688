# syntax=docker/dockerfile:1
# Build: docker build -t appliance .
# Run:   docker run -p 8080:8080 -v appliance-data:/data appliance
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/appliance .

# The local runner executes scripts, so the runtime image carries the
# interpreters the example workspace uses.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends bash python3 ca-certificates \
	&& rm -rf /var/lib/apt/lists/*
COPY --from=build /out/appliance /usr/local/bin/appliance
COPY examples /srv/examples
WORKDIR /srv
EXPOSE 8080
VOLUME /data
ENTRYPOINT ["appliance"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--data-dir", "/data", "--workspace", "/srv/examples"]
