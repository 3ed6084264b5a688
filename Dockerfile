# syntax=docker/dockerfile:1
# Build: docker build -t appliance .
# Run:   docker run -p 127.0.0.1:8080:8080 -v appliance-data:/data appliance
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
# WARNING: this default runs with auth OFF. The server must listen on
# 0.0.0.0 to be reachable through the container's port, so it needs
# --insecure-no-auth to start: anyone who can reach the published port can
# run any task, that is, run code in this container. Publish it on loopback
# only (-p 127.0.0.1:8080:8080, as above), or turn auth on instead: mount a
# server config with an auth: section (jwt_secret, refresh_secret, a
# provider and an initial_user; see the README) and run
#   docker run -p 8080:8080 -v appliance-data:/data -v $PWD/server-config.yaml:/etc/appliance.yaml \
#     appliance serve --config /etc/appliance.yaml --listen 0.0.0.0:8080 --data-dir /data --workspace /srv/examples
# which needs no opt-in.
CMD ["serve", "--listen", "0.0.0.0:8080", "--insecure-no-auth", "--data-dir", "/data", "--workspace", "/srv/examples"]
