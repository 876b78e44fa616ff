# Sourced by the GPU benchmarks (bench/*/run.sh, run from the repository
# root): builds libvgpu.so and the vgpu CLI in Release, without the tests,
# into build/gpu, and sets build, lib and vgpu. Exits the script on failure.
#   . bench/gpu_build.sh
build=build/gpu
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHAMI_BUILD_TESTS=OFF -DHAMI_WERROR=OFF \
  -DHAMI_LIBVGPU_ONLY=ON >/dev/null &&
  cmake --build "$build" -j "$(nproc)" --target vgpu_lib vgpu >/dev/null || exit 1
lib=$PWD/$build/src/libvgpu.so
vgpu=$PWD/$build/src/vgpu
