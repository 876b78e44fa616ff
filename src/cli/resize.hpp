#pragma once
// `vgpu resize`: changes a running `vgpu run` job's memory limit and SM share
// without restarting it. The new size must fit the job's GPU beside the other
// jobs there, as `vgpu run` would place a new job (unless --overcommit); the
// job's limits file (<job>/limits, the container contract's record) is then
// replaced by rename, and every process of the job follows it within a second
// (libvgpu.so rereads it). Memory lowered below what the job holds takes
// nothing back: its allocations are refused until it is under. An MPS job can
// only have its memory lowered (protocol::mps_resize_refusal).
//
//   vgpu resize train --memory 8g --cores 50
//
//   ResizeOptions o; o.name = "train"; o.memory = "8g"; o.cores = 50;
//   return run_resize(o);

#include <optional>
#include <string>

namespace hami::cli {

struct ResizeOptions {
  std::string name;          // the job's --name
  std::string memory;        // "8g"; empty: unchanged
  std::optional<int> cores;  // 0-100 (0 or 100: no cap); nullopt: unchanged
  std::string hook_path;     // as given to vgpu run; empty: its default
  std::string nvml_library = "libnvidia-ml.so.1";
  bool overcommit = false;
};

int run_resize(const ResizeOptions& options);

}  // namespace hami::cli
