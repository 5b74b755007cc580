// SPDX-License-Identifier: Apache-2.0
// Internal: a mutex for critical sections of a few instructions that two threads take in turn
// for every message (the publish intake, a subscription's queue). A std::mutex that finds its
// lock taken puts the thread to sleep at once, and its holder pays a wake-up on release; on a
// busy machine those two context switches cost a thousand times the section. glibc's adaptive
// mutex (PTHREAD_MUTEX_ADAPTIVE_NP) first spins a bounded, self-tuning number of tries, then
// sleeps as a plain mutex does: a holder that is running lets go within the spin, one that was
// preempted is not spun on for long. Elsewhere it is a std::mutex.
#pragma once

#include <mutex>

#if defined(__GLIBC__)
#include <pthread.h>
#endif

namespace polybus::detail {

#if defined(__GLIBC__) && defined(PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP)
class BriefMutex {
 public:
  BriefMutex() = default;
  ~BriefMutex() { pthread_mutex_destroy(&mutex_); }
  BriefMutex(const BriefMutex&) = delete;
  BriefMutex& operator=(const BriefMutex&) = delete;

  void lock() { pthread_mutex_lock(&mutex_); }
  bool try_lock() { return pthread_mutex_trylock(&mutex_) == 0; }
  void unlock() { pthread_mutex_unlock(&mutex_); }

 private:
  pthread_mutex_t mutex_ = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
};
#else
using BriefMutex = std::mutex;
#endif

}  // namespace polybus::detail
