// mmdoc::Status and mmdoc::Result<T>: how every mmdoc call reports failure.
//
// No mmdoc function throws across the API. A call that can fail returns a
// Status (or a Result<T> holding either a value or a non-OK Status). An OK
// Status holds no allocation, so the happy path costs a null pointer test.
//
// The set of codes is small and closed:
//   kNotFound         the key, document, collection or index does not exist
//   kAlreadyExists    duplicate _id, unique-index violation, name in use
//   kInvalidArgument  bad input: invalid JSON/BSON, bad filter, bad options
//   kCorruption       the file is damaged; the message names the page
//   kIOError          the OS failed a read, write, sync or grow (errno text)
//   kNotSupported     the operation is not available in this configuration
//   kBusy             the database file is locked by another handle/process
//   kFull             the disk is full (ENOSPC)
//
// Thread safety: a Status is a value; distinct objects may be used from
// different threads without synchronization.
#ifndef MMDOC_STATUS_H_
#define MMDOC_STATUS_H_

#include <cassert>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace mmdoc {

class [[nodiscard]] Status {
 public:
  enum class Code : int {
    kOk = 0,
    kNotFound = 1,
    kAlreadyExists = 2,
    kInvalidArgument = 3,
    kCorruption = 4,
    kIOError = 5,
    kNotSupported = 6,
    kBusy = 7,
    kFull = 8,
  };

  Status() noexcept = default;
  Status(const Status& o) : rep_(o.rep_ ? std::make_unique<Rep>(*o.rep_) : nullptr) {}
  Status& operator=(const Status& o) {
    if (this != &o) rep_ = o.rep_ ? std::make_unique<Rep>(*o.rep_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view m, std::string_view m2 = {}) {
    return Status(Code::kNotFound, m, m2);
  }
  static Status AlreadyExists(std::string_view m, std::string_view m2 = {}) {
    return Status(Code::kAlreadyExists, m, m2);
  }
  static Status InvalidArgument(std::string_view m, std::string_view m2 = {}) {
    return Status(Code::kInvalidArgument, m, m2);
  }
  static Status Corruption(std::string_view m, std::string_view m2 = {}) {
    return Status(Code::kCorruption, m, m2);
  }
  static Status IOError(std::string_view m, std::string_view m2 = {}) {
    return Status(Code::kIOError, m, m2);
  }
  static Status NotSupported(std::string_view m, std::string_view m2 = {}) {
    return Status(Code::kNotSupported, m, m2);
  }
  static Status Busy(std::string_view m, std::string_view m2 = {}) {
    return Status(Code::kBusy, m, m2);
  }
  static Status Full(std::string_view m, std::string_view m2 = {}) {
    return Status(Code::kFull, m, m2);
  }

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  bool IsNotFound() const { return code() == Code::kNotFound; }
  bool IsAlreadyExists() const { return code() == Code::kAlreadyExists; }
  bool IsInvalidArgument() const { return code() == Code::kInvalidArgument; }
  bool IsCorruption() const { return code() == Code::kCorruption; }
  bool IsIOError() const { return code() == Code::kIOError; }
  bool IsNotSupported() const { return code() == Code::kNotSupported; }
  bool IsBusy() const { return code() == Code::kBusy; }
  bool IsFull() const { return code() == Code::kFull; }

  // The message alone, without the code name ("" for OK).
  const std::string& message() const {
    static const std::string kEmpty;
    return rep_ ? rep_->msg : kEmpty;
  }
  // "OK", or "<Code name>: <message>", e.g. "Corruption: page 17: bad checksum".
  std::string ToString() const {
    if (!rep_) return "OK";
    return std::string(CodeName(rep_->code)) + ": " + rep_->msg;
  }
  static const char* CodeName(Code c) {
    switch (c) {
      case Code::kOk:
        return "OK";
      case Code::kNotFound:
        return "NotFound";
      case Code::kAlreadyExists:
        return "AlreadyExists";
      case Code::kInvalidArgument:
        return "InvalidArgument";
      case Code::kCorruption:
        return "Corruption";
      case Code::kIOError:
        return "IOError";
      case Code::kNotSupported:
        return "NotSupported";
      case Code::kBusy:
        return "Busy";
      case Code::kFull:
        return "Full";
    }
    return "Unknown";
  }

 private:
  struct Rep {
    Code code;
    std::string msg;
  };
  Status(Code c, std::string_view m, std::string_view m2) : rep_(std::make_unique<Rep>()) {
    rep_->code = c;
    rep_->msg.assign(m.data(), m.size());
    if (!m2.empty()) {
      rep_->msg += ": ";
      rep_->msg.append(m2.data(), m2.size());
    }
  }
  std::unique_ptr<Rep> rep_;
};

// Result<T>: a T, or a non-OK Status. Check ok() before value().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT
  bool ok() const { return v_.index() == 0; }
  // OK when ok(), else the error.
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }
  // REQUIRES: ok()
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  // As std::optional's: `auto n = *db->Count("c");` moves out of the temporary.
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace mmdoc

// Returns early from the enclosing function when `expr` is not OK.
#define MMDOC_RETURN_IF_ERROR(expr)      \
  do {                                   \
    ::mmdoc::Status _mmdoc_s = (expr);   \
    if (!_mmdoc_s.ok()) return _mmdoc_s; \
  } while (0)

#endif  // MMDOC_STATUS_H_
