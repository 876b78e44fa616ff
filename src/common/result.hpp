#pragma once
// Result<T>: a value or an Error, for code that must not throw (libvgpu.so, the
// state-file library) and for parsers whose failure is an expected outcome.
// C++20 has no std::expected, so this is a deliberately small stand-in. The error
// type defaults to Error; a component whose callers branch on more than a
// message (the Kubernetes client: HTTP status, reason) names its own.
//
//   Result<int> parse(std::string_view s);
//   auto r = parse("42");
//   if (!r) { log(r.error().message); return; }
//   use(*r);

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace hami {

struct Error {
  std::string message;  // complete sentence fragment: "<subject>: <what is wrong>"
  int sys_errno = 0;    // errno when the failure came from a system call, else 0

  // "<what>: <strerror(err)>", keeping err for callers that branch on it.
  static Error from_errno(std::string what, int err = errno) {
    Error e{std::move(what), err};
    e.message += ": ";
    e.message += std::strerror(err);
    return e;
  }
};

template <class T, class E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(E error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const E& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, E> v_;
};

template <class E>
class [[nodiscard]] Result<void, E> {
 public:
  Result() = default;
  Result(E error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const E& error() const { return error_; }

 private:
  E error_;
  bool ok_ = true;
};

}  // namespace hami
