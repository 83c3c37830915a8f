#pragma once
// A reference to a callable that a function calls only before it returns (the thread pool's
// loops take their bodies this way). Unlike std::function it never allocates: a lambda that
// captures more than two references put std::function on the heap at every call, thousands of
// times a decode step. It refers to a callable object (a lambda, a std::function; a plain
// function through a lambda), so it is a parameter type only: one kept past the call (a local
// initialised from a temporary lambda, a member) would dangle.
#include <memory>
#include <type_traits>
#include <utility>

namespace gizml {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
    requires(std::is_object_v<std::remove_reference_t<F>> && !std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
             std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): converts as std::function does
      : callable_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* callable, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(callable))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(callable_, std::forward<Args>(args)...); }

 private:
  void* callable_;
  R (*call_)(void*, Args...);
};

}  // namespace gizml
