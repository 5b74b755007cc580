// SPDX-License-Identifier: Apache-2.0
// For adapters and the core: a move-only std::function that keeps its callable inside itself, never
// on the heap. A callable larger than Capacity does not compile (raise Capacity, or capture less).
// Used where an allocation per call would be paid per message (an operation's completion).
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace polybus::detail {

template <typename Signature, std::size_t Capacity>
class InplaceFunction;

template <typename R, typename... Args, std::size_t Capacity>
class InplaceFunction<R(Args...), Capacity> {
 public:
  InplaceFunction() = default;
  InplaceFunction(std::nullptr_t) {}  // NOLINT: like std::function
  template <typename F, typename Fn = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<Fn, InplaceFunction> &&
                                        std::is_invocable_r_v<R, Fn&, Args...>>>
  InplaceFunction(F&& f) {  // NOLINT: like std::function
    static_assert(sizeof(Fn) <= Capacity, "the callable does not fit: raise Capacity");
    static_assert(alignof(Fn) <= alignof(std::max_align_t), "over-aligned callable");
    static_assert(std::is_nothrow_move_constructible_v<Fn>,
                  "the callable must move without throwing");
    ::new (static_cast<void*>(&storage_)) Fn(std::forward<F>(f));
    ops_ = &kOps<Fn>;
  }
  InplaceFunction(InplaceFunction&& other) noexcept { take(other); }
  InplaceFunction& operator=(InplaceFunction&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  InplaceFunction& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  InplaceFunction(const InplaceFunction&) = delete;
  InplaceFunction& operator=(const InplaceFunction&) = delete;
  ~InplaceFunction() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  R operator()(Args... args) { return ops_->call(&storage_, std::forward<Args>(args)...); }

 private:
  struct Ops {
    R (*call)(void*, Args&&...);
    void (*move)(void* to, void* from) noexcept;  // move-constructs, then destroys `from`
    void (*destroy)(void*) noexcept;
  };
  template <typename Fn>
  static R call(void* f, Args&&... args) {
    return (*static_cast<Fn*>(f))(std::forward<Args>(args)...);
  }
  template <typename Fn>
  static void move(void* to, void* from) noexcept {
    ::new (to) Fn(std::move(*static_cast<Fn*>(from)));
    static_cast<Fn*>(from)->~Fn();
  }
  template <typename Fn>
  static void destroy(void* f) noexcept {
    static_cast<Fn*>(f)->~Fn();
  }
  template <typename Fn>
  static constexpr Ops kOps{&call<Fn>, &move<Fn>, &destroy<Fn>};

  void reset() noexcept {
    if (ops_) ops_->destroy(&storage_), ops_ = nullptr;
  }
  void take(InplaceFunction& other) noexcept {
    if (!other.ops_) return;
    other.ops_->move(&storage_, &other.storage_);
    ops_ = std::exchange(other.ops_, nullptr);
  }

  std::aligned_storage_t<Capacity, alignof(std::max_align_t)> storage_;
  const Ops* ops_ = nullptr;
};

}  // namespace polybus::detail
