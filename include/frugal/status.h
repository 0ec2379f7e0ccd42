// Status and StatusOr<T>: how frugal reports expected failures.
//
// Expected failures (a timeout, a lost peer, I/O, bad configuration, a malformed payload) are
// returned, never thrown. Violated preconditions of frugal's own code throw (see check.h).
// The set of codes is closed; docs/errors.md says which code each kind of failure uses.
//
// Thread safety: Status and StatusOr are values; distinct objects may be used from distinct
// threads, a single object needs external synchronization like any std type.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "frugal/check.h"

namespace frugal {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad configuration or input from a user: flags, names, lengths
  kNotFound,            // a named thing (file, compressor, dataset) does not exist
  kTimeout,             // a wait expired; the message names the peers that did not answer
  kPeerLost,            // a peer closed, died or aborted
  kIoError,             // reading or writing a file or socket failed
  kMalformed,           // bytes that crossed the wire or came from a file are not valid
  kFailedPrecondition,  // the operation is not allowed in the current state
  kCancelled,           // the operation was cancelled by a shutdown
  kInternal,            // an invariant of frugal itself failed (a bug)
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "Timeout: ring allreduce: no message from rank 3 within 2000 ms".
  std::string ToString() const;

  // Returns a copy whose message is "context: message"; an OK status stays OK.
  Status Annotate(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status TimeoutError(std::string message);
Status PeerLostError(std::string message);
Status IoError(std::string message);
Status MalformedError(std::string message);
Status FailedPreconditionError(std::string message);
Status CancelledError(std::string message);
Status InternalError(std::string message);

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    FRUGAL_INTERNAL_ASSERT(!status_.ok(), "StatusOr built from an OK Status without a value");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // Precondition: ok(). Throws CheckError otherwise.
  T& value() & {
    FRUGAL_CHECK(ok(), "StatusOr::value() on an error: ", status_.ToString());
    return *value_;
  }
  const T& value() const& {
    FRUGAL_CHECK(ok(), "StatusOr::value() on an error: ", status_.ToString());
    return *value_;
  }
  T&& value() && {
    FRUGAL_CHECK(ok(), "StatusOr::value() on an error: ", status_.ToString());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace frugal

#define FRUGAL_STATUS_CONCAT_INNER(a, b) a##b
#define FRUGAL_STATUS_CONCAT(a, b) FRUGAL_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define FRUGAL_RETURN_IF_ERROR(expr)                         \
  do {                                                       \
    ::frugal::Status frugal_status_tmp_ = (expr);            \
    if (!frugal_status_tmp_.ok()) return frugal_status_tmp_; \
  } while (false)

// `FRUGAL_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a StatusOr or returns its error.
#define FRUGAL_ASSIGN_OR_RETURN(lhs, expr) \
  FRUGAL_ASSIGN_OR_RETURN_IMPL(FRUGAL_STATUS_CONCAT(frugal_statusor_, __LINE__), lhs, expr)
#define FRUGAL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
