# hami-scheduler: the kube-scheduler extender and mutating webhook.
# Build from the repository root (the context is the whole repository; see
# /.dockerignore):
#   docker build -f deploy/docker/scheduler.Dockerfile -t REGISTRY/hami-scheduler:0.1.0 .
# The chart runs /usr/local/bin/hami-scheduler from this image
# (scheduler.extender.image); upstream HAMi's chart runs it as `scheduler`.

ARG DEBIAN_IMAGE=debian:bookworm-slim

# ---- build: the toolchain and -dev packages of scripts/setup.sh that a
# Release build of the daemons needs (no test, fuzz or format tools).
FROM ${DEBIAN_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential g++ cmake ninja-build pkg-config \
      nlohmann-json3-dev libcli11-dev zlib1g-dev \
      libcpp-httplib-dev libboost-dev libssl-dev libyaml-cpp-dev \
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc \
      libbenchmark-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# CMake configures every subproject it lists (bench/ and tools/ too), so they
# come along; tests are switched off below.
COPY CMakeLists.txt CMakePresets.json ./
COPY proto proto
COPY src src
COPY tools tools
COPY bench bench
RUN cmake --preset release -DHAMI_BUILD_TESTS=OFF \
 && cmake --build --preset release --target hami-scheduler -j "$(nproc)"

# ---- runtime: the shared libraries the binary links, nothing else.
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcpp-httplib0.11 libssl3 libyaml-cpp0.7 libstdc++6 libbrotli1 zlib1g \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/release/src/hami-scheduler /usr/local/bin/hami-scheduler
# Upstream HAMi's chart runs `scheduler` from its image: a link to ours lets
# its Deployment run this image unchanged (docs/operations.md).
RUN ln -s hami-scheduler /usr/local/bin/scheduler
LABEL org.opencontainers.image.title="hami-scheduler" \
      org.opencontainers.image.description="HAMi (C++) scheduler extender and mutating webhook"
# Reads only its certificate and config; binds an unprivileged port (8443).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/hami-scheduler"]
