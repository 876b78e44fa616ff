#pragma once
// Byte-range locks on the state file that the kernel releases when their owner
// dies: Linux open-file-description (OFD) locks. Upstream guards its state file
// with a sem_t in shared memory, which a SIGKILLed holder keeps forever; these
// cannot be held by a dead process, so no waiter ever needs a timeout to recover.
//
// An OFD lock belongs to an open file description, not to a thread or process:
// threads sharing an fd share its locks (callers add a mutex), and a forked child
// inherits the parent's description and with it the parent's locks (a child must
// reopen the file). The lock bytes live far beyond the end of every known layout
// so they never conflict with upstream's lockf() over the region's own bytes.
//
//   if (auto r = hami::region::lock_range(fd, kRegistryLockOffset, 1, LockMode::kExclusive,
//                                         std::chrono::seconds(5)); !r) { ... }
//   ...
//   hami::region::unlock_range(fd, kRegistryLockOffset, 1);

#include <sys/types.h>

#include <chrono>

#include "common/result.hpp"
#include "region/layout_v1.hpp"

namespace hami::region {

// Upstream serialises creation with lockf(F_LOCK, sizeof(region)) from offset 0;
// taking the same range keeps concurrent creators of either implementation apart.
inline constexpr off_t kInitLockOffset = 0;
inline constexpr off_t kInitLockLength = static_cast<off_t>(kRegionSize);

inline constexpr off_t kLockBase = off_t{1} << 28;
// Held while slots are claimed, released or swept.
inline constexpr off_t kRegistryLockOffset = kLockBase;
// Held by a slot's owner for as long as it lives: free lock + our tag = dead owner.
constexpr off_t slot_lock_offset(int slot) {
  return kLockBase + 1 + slot;
}

enum class LockMode { kShared, kExclusive };

// true: acquired; false: another open file description holds a conflicting lock.
Result<bool> try_lock_range(int fd, off_t start, off_t len, LockMode mode);

// Waits up to `timeout`; the error on timeout has sys_errno == ETIMEDOUT.
Result<void> lock_range(int fd, off_t start, off_t len, LockMode mode,
                        std::chrono::steady_clock::duration timeout);

void unlock_range(int fd, off_t start, off_t len);

// Whether another open file description holds a lock that would conflict with
// `mode`. Works on read-only descriptors too, so inspectors need no write access.
Result<bool> range_locked_by_other(int fd, off_t start, off_t len, LockMode mode);

}  // namespace hami::region
