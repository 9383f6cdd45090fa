// A minimal parallel-for for the builder's compile steps (-j N): N worker threads take task
// indices in order; after the first failure no new task starts, and that failure is returned.
// Tasks report progress through their own synchronised sinks.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/result.h"

namespace kiln::core {

inline Result<void> parallelFor(std::size_t count, int jobs,
                                const std::function<Result<void>(std::size_t)>& task) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::optional<Error> first_error;
  auto worker = [&] {
    while (!failed.load()) {
      const std::size_t i = next.fetch_add(1);
      if (i >= count) return;
      Result<void> result = task(i);
      if (!result) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first_error) first_error = result.failure();
        failed = true;
      }
    }
  };
  const std::size_t threads =
      std::min<std::size_t>(count, static_cast<std::size_t>(std::max(1, jobs)));
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
  if (first_error) return *first_error;
  return {};
}

}  // namespace kiln::core
