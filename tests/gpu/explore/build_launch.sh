# Sourced by the launch-path explorations (launch_path.sh, launch_samples.sh,
# warm_ab.sh, phased_ab.sh, idle_ab.sh), from the repository root: builds
# libvgpu.so (Release) and bench/sm_limit/launch_bench into build/gpu; sets
# $build and $lib.
#   build_vgpu SRC_DIR BUILD_DIR   builds libvgpu.so from another source tree
#   copy_sources DIR               a fresh copy of what that build needs, to edit
#                                  into a variant
copy_sources() {
  rm -rf "$1" && mkdir -p "$1" && cp -r CMakeLists.txt CMakePresets.json src tools bench "$1"/
}
build_vgpu() {
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DHAMI_BUILD_TESTS=OFF -DHAMI_WERROR=OFF \
    -DHAMI_LIBVGPU_ONLY=ON >/dev/null && cmake --build "$2" -j "$(nproc)" --target vgpu_lib >/dev/null
}
build=build/gpu
build_vgpu . "$build" || exit 1
lib=$PWD/$build/src/libvgpu.so
nvcc -O2 -arch=sm_90 -o "$build/launch_bench" bench/sm_limit/launch_bench.cu || exit 1
