#pragma once
// Name -> hook lookups for dlsym and cuGetProcAddress, generated from
// hooks.def. A lookup answers our hook only while the library is accounting;
// in pass-through mode it answers nothing and callers get the driver's own
// pointer, so an unconfigured process pays nothing per call.
//
//   if (void* h = hami::vgpu::hook_for_cuda_symbol("cuMemAlloc_v2")) return h;
//   *pfn = hami::vgpu::substitute_cuda_pointer(*pfn);   // after the real cuGetProcAddress

namespace hami::vgpu {

// Our hook for an exported driver/NVML name, or nullptr.
void* hook_for_cuda_symbol(const char* name);
void* hook_for_nvml_symbol(const char* name);

// Given a pointer the real cuGetProcAddress returned, our hook for the same
// function variant, or the pointer itself. The driver has already applied the
// requested CUDA version and per-thread-stream flags; we recognise which
// variant it chose by its address (or, failing that, its exported name).
void* substitute_cuda_pointer(void* real);

}  // namespace hami::vgpu
