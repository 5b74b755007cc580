// SPDX-License-Identifier: Apache-2.0
// A first-in first-out queue that keeps its memory, for what an adapter queues per message
// (publishes waiting for a window, completions waiting for an answer). std::deque allocates and
// frees a block every few entries for as long as entries flow through it; this is a vector and
// the index of its oldest entry, which allocates only while it grows past its largest size so
// far, and gives a burst's peak back once it drains (above kKeptAtMost entries).
//
// Unlike std::deque's, references to entries do not survive push_back or pop_front.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace polybus {

template <typename T>
class Fifo {
 public:
  static constexpr std::size_t kKeptAtMost = 4096;

  Fifo() = default;
  Fifo(const Fifo&) = default;
  Fifo& operator=(const Fifo&) = default;
  // The one moved from is left empty.
  Fifo(Fifo&& other) noexcept : items_(std::move(other.items_)), head_(other.head_) {
    other.items_.clear();
    other.head_ = 0;
  }
  Fifo& operator=(Fifo&& other) noexcept {
    if (this != &other) {
      items_ = std::move(other.items_);
      head_ = other.head_;
      other.items_.clear();
      other.head_ = 0;
    }
    return *this;
  }

  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }
  // Entries (live and dead) it holds without allocating.
  std::size_t capacity() const { return items_.capacity(); }
  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }
  T& back() { return items_.back(); }
  const T& back() const { return items_.back(); }
  auto begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  auto end() const { return items_.end(); }

  void push_back(T item) { items_.push_back(std::move(item)); }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    return items_.emplace_back(std::forward<Args>(args)...);
  }
  // Back in front of the oldest: an entry taken and given back unused.
  void push_front(T item) {
    if (head_ > 0)
      items_[--head_] = std::move(item);
    else
      items_.insert(items_.begin(), std::move(item));
  }
  // The oldest entry is released now (what it holds goes with it).
  void pop_front() {
    items_[head_] = T();
    if (++head_ == items_.size()) return clear();
    // Moved down once the dead entries are the larger part: each entry moves at most once per
    // time the queue's length halves, so a pop costs O(1) on average.
    if (head_ > items_.size() / 2) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }
  // The newest entry is released now (one just pushed and taken back).
  void pop_back() {
    items_.pop_back();
    if (head_ == items_.size()) clear();
  }
  // Entries for which pred is true are released; the others keep their order.
  template <typename Pred>
  void remove_if(Pred pred) {
    items_.erase(std::remove_if(begin(), end(), pred), items_.end());
    if (head_ == items_.size()) clear();
  }
  void clear() {
    if (items_.capacity() > kKeptAtMost) std::vector<T>().swap(items_);
    items_.clear();
    head_ = 0;
  }

 private:
  std::vector<T> items_;
  std::size_t head_ = 0;
};

}  // namespace polybus
