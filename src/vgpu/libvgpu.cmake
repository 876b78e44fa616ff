# libvgpu.so, included from src/CMakeLists.txt (paths are relative to src/).
# Kept apart so a build of the library alone (HAMI_LIBVGPU_ONLY, as the GPU
# machines do) needs nothing the daemons need.
set(VGPU_MAP ${CMAKE_CURRENT_BINARY_DIR}/libvgpu.map)
add_custom_command(
  OUTPUT ${VGPU_MAP}
  COMMAND ${CMAKE_C_COMPILER} -E -P -x c -I${CMAKE_CURRENT_SOURCE_DIR}/vgpu
          ${CMAKE_CURRENT_SOURCE_DIR}/vgpu/libvgpu.map.in -o ${VGPU_MAP}
  DEPENDS vgpu/libvgpu.map.in vgpu/hooks.def
  COMMENT "Generating the libvgpu.so export list from hooks.def")
add_custom_target(vgpu_map DEPENDS ${VGPU_MAP})

add_library(vgpu_lib SHARED
  vgpu/real_driver.cpp
  vgpu/hook_table.cpp
  vgpu/device_map.cpp
  vgpu/context_tracker.cpp
  vgpu/memory_probe.cpp
  vgpu/pool_charges.cpp
  vgpu/capture_state.cpp
  vgpu/graph_memory.cpp
  vgpu/vmm_tracker.cpp
  vgpu/module_charges.cpp
  vgpu/runtime.cpp
  vgpu/memory_hooks.cpp
  vgpu/spill.cpp
  vgpu/context_hooks.cpp
  vgpu/info_hooks.cpp
  vgpu/cuda_event_timer.cpp
  vgpu/sm_control.cpp
  vgpu/launch_hooks.cpp
  vgpu/graph_hooks.cpp
  vgpu/module_hooks.cpp
  vgpu/proc_address_hooks.cpp
  vgpu/dlsym_hook.cpp)
add_dependencies(vgpu_lib vgpu_map)
target_link_libraries(vgpu_lib PRIVATE hami_vgpu_core ${CMAKE_DL_LIBS})
set_target_properties(vgpu_lib PROPERTIES OUTPUT_NAME vgpu LINK_DEPENDS ${VGPU_MAP})
# The C++ runtime is linked in statically: a container's libstdc++ may be older
# than ours, and a library every process preloads must load everywhere.
target_link_options(vgpu_lib PRIVATE -Wl,--version-script=${VGPU_MAP} -Wl,-z,defs -Wl,-z,now
                                 -static-libstdc++ -static-libgcc)
hami_warnings(vgpu_lib)
# dlsym must fall through to glibc as a tail call (see dlsym_hook.cpp), so that
# file is always optimised and never instrumented.
set_source_files_properties(vgpu/dlsym_hook.cpp PROPERTIES COMPILE_OPTIONS
  "-O2;-foptimize-sibling-calls;-fno-stack-protector;-fno-sanitize=all;-fcf-protection=none")
