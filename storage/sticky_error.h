// storage::StickyError: rule 8 of the commit protocol (storage/pager.h). The
// first I/O error of a commit, a log sync or a checkpoint is kept, and every
// later write fails with it until the database is reopened.
//
// Thread safety: all methods are thread-safe; Has() takes no lock.
#ifndef MMDOC_STORAGE_STICKY_ERROR_H_
#define MMDOC_STORAGE_STICKY_ERROR_H_

#include <atomic>

#include "mmdoc/status.h"
#include "storage/mutex.h"

namespace mmdoc::storage {

class StickyError {
 public:
  // Keeps `s` unless an error is already kept.
  void Set(const Status& s) MMDOC_EXCLUDES(mu_) {
    MutexLock l(&mu_);
    if (error_.ok()) error_ = s;
    has_.store(true, std::memory_order_release);
  }
  bool Has() const { return has_.load(std::memory_order_acquire); }
  // The kept error; OK when none.
  Status Get() MMDOC_EXCLUDES(mu_) {
    if (!Has()) return Status::OK();  // Set stores has_ after error_
    MutexLock l(&mu_);
    return error_;
  }

 private:
  Mutex mu_;
  std::atomic<bool> has_{false};
  Status error_ MMDOC_GUARDED_BY(mu_);
};

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_STICKY_ERROR_H_
