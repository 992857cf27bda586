// storage/mutex.h: the locks mmdoc uses internally (Mutex, MutexLock,
// CondVar) and the macros that state lock contracts so that Clang's
// thread-safety analysis checks them at compile time.
//
// Checking: `tools/check-thread-safety` builds the library with clang and
// -Wthread-safety -Werror=thread-safety (CI runs it). Under other compilers
// the macros expand to nothing and the classes are thin wrappers of
// std::mutex and std::condition_variable.
//
// The contracts, on declarations:
//   MMDOC_GUARDED_BY(mu)       a member read or written only with mu held.
//   MMDOC_PT_GUARDED_BY(mu)    the same, for what a pointer member points to.
//   MMDOC_REQUIRES(mu...)      the caller must hold mu (a "...Locked" helper).
//   MMDOC_EXCLUDES(mu...)      the caller must not hold mu (the function
//                              takes it; calling with it held deadlocks).
//   MMDOC_ACQUIRE(mu...)       the function returns with mu held.
//   MMDOC_RELEASE(mu...)       the function returns with mu released.
//   MMDOC_ASSERT_CAPABILITY(mu) from here on the analysis assumes mu held.
//   MMDOC_RETURN_CAPABILITY(mu) on a function returning a lock: it is mu.
//   MMDOC_CAPABILITY(name)     on a class: its objects are locks.
//   MMDOC_SCOPED_CAPABILITY    on a class: an RAII holder of a lock.
//   MMDOC_NO_THREAD_SAFETY_ANALYSIS
//                              turns the analysis off for one function. Only
//                              for a correct pattern the analysis cannot
//                              express, with a comment saying which.
// The analysis follows locks within one function; it does not see a lock a
// caller took unless the callee says MMDOC_REQUIRES. State that is protected
// some other way (atomics, state only the single writer touches) is left
// unannotated with a comment naming its protocol.
//
// Example:
//   class Counter {
//    public:
//     void Add(int n) MMDOC_EXCLUDES(mu_) {
//       MutexLock l(&mu_);
//       AddLocked(n);
//     }
//    private:
//     void AddLocked(int n) MMDOC_REQUIRES(mu_) { total_ += n; }
//     Mutex mu_;
//     int total_ MMDOC_GUARDED_BY(mu_) = 0;
//   };
#ifndef MMDOC_STORAGE_MUTEX_H_
#define MMDOC_STORAGE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define MMDOC_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define MMDOC_THREAD_ANNOTATION_(x)
#endif

#define MMDOC_CAPABILITY(name) MMDOC_THREAD_ANNOTATION_(capability(name))
#define MMDOC_SCOPED_CAPABILITY MMDOC_THREAD_ANNOTATION_(scoped_lockable)
#define MMDOC_GUARDED_BY(mu) MMDOC_THREAD_ANNOTATION_(guarded_by(mu))
#define MMDOC_PT_GUARDED_BY(mu) MMDOC_THREAD_ANNOTATION_(pt_guarded_by(mu))
#define MMDOC_REQUIRES(...) MMDOC_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define MMDOC_EXCLUDES(...) MMDOC_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define MMDOC_ACQUIRE(...) MMDOC_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define MMDOC_RELEASE(...) MMDOC_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define MMDOC_ASSERT_CAPABILITY(mu) MMDOC_THREAD_ANNOTATION_(assert_capability(mu))
#define MMDOC_RETURN_CAPABILITY(mu) MMDOC_THREAD_ANNOTATION_(lock_returned(mu))
#define MMDOC_NO_THREAD_SAFETY_ANALYSIS MMDOC_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace mmdoc::storage {

class CondVar;

// A non-recursive mutex (std::mutex) the analysis knows as a lock. Prefer
// MutexLock to calling Lock and Unlock by hand.
class MMDOC_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() MMDOC_ACQUIRE() { mu_.lock(); }
  void Unlock() MMDOC_RELEASE() { mu_.unlock(); }
  // Tells the analysis the calling thread holds this mutex (for code it
  // cannot follow). Checks nothing at run time: std::mutex has no owner.
  void AssertHeld() const MMDOC_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for the life of the object (a scope). Inside the scope the
// mutex may be released and retaken by hand (mu->Unlock(); ...; mu->Lock();)
// as long as it is held again when the scope ends.
class MMDOC_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) MMDOC_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() MMDOC_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable bound to one Mutex for its whole life. Every Wait
// REQUIRES that mutex held (not annotated: the analysis cannot name the
// mutex through the CondVar); it is released while waiting and held again
// when Wait returns. Wakeups may be spurious: wait in a loop that tests the
// condition. Signal and SignalAll may be called with or without the mutex.
class CondVar {
 public:
  explicit CondVar(Mutex* mu) : mu_(mu) {}
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Blocks until signalled (or spuriously woken).
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // the caller still holds the mutex
  }
  // Blocks until signalled, spuriously woken, or `timeout` has passed.
  // Returns false when it timed out (at once when timeout <= 0).
  bool WaitFor(std::chrono::nanoseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    const bool woken = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  // Wakes one waiter / every waiter.
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  Mutex* const mu_;
  std::condition_variable cv_;
};

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_MUTEX_H_
