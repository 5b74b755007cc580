// SPDX-License-Identifier: Apache-2.0
#include "block_pool.hpp"

namespace polybus::detail {

BlockPool::~BlockPool() {
  collect_returned();
  while (spare_) {
    Node* next = spare_->next;
    ::operator delete(spare_);
    spare_ = next;
  }
}

void* BlockPool::take() {
  if (strand_ && !strand_->running_in_this_thread()) return ::operator new(block_size_);
  if (!spare_) collect_returned();
  if (!spare_) return ::operator new(block_size_);
  Node* node = spare_;
  spare_ = node->next;
  if (spare_count_ > 0) --spare_count_;  // about, after a list taken whole (collect_returned)
  node->~Node();
  return node;
}

void BlockPool::give(void* block) noexcept {
  if (strand_ && strand_->running_in_this_thread()) return push_spare(new (block) Node{nullptr});
  if (returned_count_.fetch_add(1, std::memory_order_relaxed) >= max_spare_) {
    returned_count_.fetch_sub(1, std::memory_order_relaxed);
    return ::operator delete(block);
  }
  Node* node = new (block) Node{nullptr};
  node->next = returned_.load(std::memory_order_relaxed);
  while (!returned_.compare_exchange_weak(node->next, node, std::memory_order_release,
                                          std::memory_order_relaxed)) {
  }
}

// Strand or owner (or the destructor): everything given back elsewhere joins the strand's list.
void BlockPool::collect_returned() {
  Node* node = returned_.exchange(nullptr, std::memory_order_acquire);
  if (node && !spare_) {
    // The strand's list ran dry (take()): the returned list becomes it whole, without a walk over
    // blocks another core wrote last; each is read when it is taken. Its length is the givers'
    // count, short by any give that counted itself before this and joins the list after.
    spare_ = node;
    spare_count_ = returned_count_.exchange(0, std::memory_order_relaxed);
    return;
  }
  std::size_t taken = 0;
  while (node) {
    Node* next = node->next;
    push_spare(node);
    node = next;
    ++taken;
  }
  // One subtraction for the lot: the count's line is the givers' too.
  if (taken > 0) returned_count_.fetch_sub(taken, std::memory_order_relaxed);
}

void BlockPool::push_spare(Node* node) noexcept {
  if (spare_count_ >= max_spare_) {
    node->~Node();
    ::operator delete(node);
    return;
  }
  node->next = spare_;
  spare_ = node;
  ++spare_count_;
}

}  // namespace polybus::detail
