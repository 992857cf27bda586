// ThreadErrors: problems that worker threads found, for the test's own
// thread to report. Catch2 v2's assertions are not thread-safe, so worker
// threads never call REQUIRE or CHECK; they Add here, and the test thread
// calls Check() after joining them.
#ifndef MMDOC_TESTS_SUPPORT_THREAD_ERRORS_H_
#define MMDOC_TESTS_SUPPORT_THREAD_ERRORS_H_

#include <catch2/catch.hpp>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace mmdoc::test {

class ThreadErrors {
 public:
  void Add(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    if (list_.size() < 20) list_.push_back(what);
    count_++;
  }
  bool any() {
    std::lock_guard<std::mutex> l(mu_);
    return count_ > 0;
  }
  // Fails the test, listing the first problems, when there are any. Call
  // from the test's thread.
  void Check() {
    std::lock_guard<std::mutex> l(mu_);
    std::string all;
    for (const std::string& e : list_) all += "\n  " + e;
    INFO(count_ << " problems in worker threads:" << all);
    REQUIRE(count_ == 0);
  }

 private:
  std::mutex mu_;
  std::vector<std::string> list_;
  uint64_t count_ = 0;
};

}  // namespace mmdoc::test

#endif  // MMDOC_TESTS_SUPPORT_THREAD_ERRORS_H_
