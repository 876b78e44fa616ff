// Module hooks: the device memory a module's globals take is charged when
// the driver commits it (module_charges.hpp).
#include "vgpu/hook_decls.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::cuda {
namespace {

using vgpu::call_real;
using vgpu::real_cuda;
using vgpu::Runtime;

uint64_t key_of(const void* handle) {
  return reinterpret_cast<uint64_t>(handle);
}

template <class Load>
CUresult load_module(CUmodule* module, Load&& real) {
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || module == nullptr) return real();
  return rt->modules().load(
      *rt, real, [&] { return key_of(*module); },
      [&] { call_real(real_cuda().cuModuleUnload, *module); });
}

template <class Load>
CUresult load_library(CUlibrary* library, Load&& real) {
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || library == nullptr) return real();
  return rt->modules().load(
      *rt, real, [&] { return key_of(*library); },
      [&] { call_real(real_cuda().cuLibraryUnload, *library); });
}

}  // namespace

extern "C" {

CUresult cuModuleLoad(CUmodule* module, const char* fname) noexcept {
  return load_module(module, [&] { return call_real(real_cuda().cuModuleLoad, module, fname); });
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) noexcept {
  return load_module(module,
                     [&] { return call_real(real_cuda().cuModuleLoadData, module, image); });
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions,
                            CUjit_option* options, void** optionValues) noexcept {
  return load_module(module, [&] {
    return call_real(real_cuda().cuModuleLoadDataEx, module, image, numOptions, options,
                     optionValues);
  });
}

CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) noexcept {
  return load_module(
      module, [&] { return call_real(real_cuda().cuModuleLoadFatBinary, module, fatCubin); });
}

CUresult cuModuleUnload(CUmodule hmod) noexcept {
  const CUresult rc = call_real(real_cuda().cuModuleUnload, hmod);
  Runtime* rt = Runtime::accounting();
  if (rc == CUDA_SUCCESS && rt != nullptr) rt->modules().unloaded(*rt, key_of(hmod));
  return rc;
}

CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions,
                           void** jitOptionsValues, unsigned int numJitOptions,
                           CUlibraryOption* libraryOptions, void** libraryOptionValues,
                           unsigned int numLibraryOptions) noexcept {
  return load_library(library, [&] {
    return call_real(real_cuda().cuLibraryLoadData, library, code, jitOptions, jitOptionsValues,
                     numJitOptions, libraryOptions, libraryOptionValues, numLibraryOptions);
  });
}

CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jitOptions,
                               void** jitOptionsValues, unsigned int numJitOptions,
                               CUlibraryOption* libraryOptions, void** libraryOptionValues,
                               unsigned int numLibraryOptions) noexcept {
  return load_library(library, [&] {
    return call_real(real_cuda().cuLibraryLoadFromFile, library, fileName, jitOptions,
                     jitOptionsValues, numJitOptions, libraryOptions, libraryOptionValues,
                     numLibraryOptions);
  });
}

CUresult cuLibraryUnload(CUlibrary library) noexcept {
  const CUresult rc = call_real(real_cuda().cuLibraryUnload, library);
  Runtime* rt = Runtime::accounting();
  if (rc == CUDA_SUCCESS && rt != nullptr) rt->modules().unloaded(*rt, key_of(library));
  return rc;
}

CUresult cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) noexcept {
  const CUresult rc = call_real(real_cuda().cuLibraryGetKernel, pKernel, library, name);
  Runtime* rt = Runtime::accounting();
  if (rc == CUDA_SUCCESS && rt != nullptr && pKernel != nullptr)
    rt->modules().kernel_found(key_of(*pKernel), key_of(library));
  return rc;
}

CUresult cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr) return call_real(cu.cuKernelGetFunction, pFunc, kernel);
  return rt->modules().first_use(*rt, rt->modules().library_of(key_of(kernel)),
                                 [&] { return call_real(cu.cuKernelGetFunction, pFunc, kernel); });
}

CUresult cuLibraryGetModule(CUmodule* pMod, CUlibrary library) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr) return call_real(cu.cuLibraryGetModule, pMod, library);
  return rt->modules().first_use(*rt, key_of(library),
                                 [&] { return call_real(cu.cuLibraryGetModule, pMod, library); });
}

}  // extern "C"
}  // namespace hami::cuda
