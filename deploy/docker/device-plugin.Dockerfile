# hami-device-plugin: the device plugin, the node agent and libvgpu.so, for
# the DaemonSet on GPU nodes. Build from the repository root (the context is
# the whole repository; see /.dockerignore):
#   docker build -f deploy/docker/device-plugin.Dockerfile -t REGISTRY/hami-device-plugin:0.1.0 .
# The chart runs from this image (devicePlugin.image):
#   /usr/local/bin/vgpu-init.sh       init container: copies libvgpu.so to
#                                     <gpuHookPath>/vgpu/libvgpu.so on the host,
#                                     where Allocate mounts it from
#   /usr/local/bin/hami-device-plugin container device-plugin
#   /usr/local/bin/hami-node-agent    container node-agent
# and, for upstream HAMi's chart, the same under upstream's names (below).
# and /usr/local/bin/vgpu (inspect, top) is there for debugging on a node.

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
 && cmake --build --preset release -j "$(nproc)" \
      --target hami-device-plugin hami-node-agent vgpu_lib vgpu

# ---- runtime: the shared libraries the binaries link. libvgpu.so needs only
# libc (its C++ runtime is static), as it loads into every GPU container.
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcpp-httplib0.11 libssl3 libyaml-cpp0.7 libstdc++6 libbrotli1 zlib1g \
      libgrpc++1.51 libgrpc29 libprotobuf32 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/release/src/hami-device-plugin /usr/local/bin/hami-device-plugin
COPY --from=build /src/build/release/src/hami-node-agent /usr/local/bin/hami-node-agent
COPY --from=build /src/build/release/src/vgpu /usr/local/bin/vgpu
# Not under /usr/local/vgpu: the DaemonSet mounts the host's directory there.
COPY --from=build /src/build/release/src/libvgpu.so /usr/local/lib/hami/libvgpu.so
COPY deploy/docker/vgpu-init.sh /usr/local/bin/vgpu-init.sh
# Upstream HAMi's chart runs these names from its image: the device-plugin
# container `nvidia-device-plugin`, its postStart hook
# `/k8s-vgpu/bin/vgpu-init.sh <gpuHookPath>/vgpu/`, the monitor container
# `vGPUmonitor`. Links to ours let its DaemonSet run this image unchanged
# (docs/operations.md, "Running with upstream's chart and flags").
RUN ln -s hami-device-plugin /usr/local/bin/nvidia-device-plugin \
 && ln -s hami-node-agent /usr/local/bin/vGPUmonitor \
 && mkdir -p /k8s-vgpu/bin \
 && ln -s /usr/local/bin/vgpu-init.sh /k8s-vgpu/bin/vgpu-init.sh
LABEL org.opencontainers.image.title="hami-device-plugin" \
      org.opencontainers.image.description="HAMi (C++) device plugin, node agent and libvgpu.so"
# Root: the plugin writes kubelet's socket directory and the host's vgpu
# directory; the agent writes the containers' state files.
ENTRYPOINT ["/usr/local/bin/hami-device-plugin"]
