#include "bench/judge/judge.h"

#include <algorithm>
#include <tuple>

namespace retryd::bench::peers {
namespace {

// A first occurrence's place in the output, comparable across topics.
std::tuple<int64_t, int, int32_t, int64_t> Order(Outcome where, const Place& p) {
  return {p.timestamp_ms, static_cast<int>(where), p.partition, p.offset};
}

Outcome Expected(Kind kind) {
  return kind == Kind::kPoison ? Outcome::kDeadLetter : Outcome::kOutput;
}

}  // namespace

bool Judge::AddInput(absl::string_view key, absl::string_view value, const Place& place) {
  const std::optional<Kind> kind = KindOfKey(key);
  const std::optional<Phase> phase = PhaseOfValue(value);
  if (!kind.has_value() || !phase.has_value()) return false;
  const auto [at, fresh] = by_value_.try_emplace(value, static_cast<uint32_t>(inputs_.size()));
  if (!fresh) return false;
  const auto [k, new_key] = key_index_.try_emplace(key, static_cast<uint32_t>(key_names_.size()));
  if (new_key) key_names_.emplace_back(key);
  Input in;
  in.key_index = k->second;
  in.phase = *phase;
  in.kind = *kind;
  in.place = place;
  inputs_.push_back(in);
  ++missing_;
  return true;
}

void Judge::AddOutcome(Outcome where, absl::string_view key, absl::string_view value,
                       const Place& place) {
  const auto it = by_value_.find(value);
  if (it == by_value_.end()) {
    ++strays_;
    return;
  }
  Input& in = inputs_[it->second];
  if (key_names_[in.key_index] != key) {
    ++strays_;
    return;
  }
  if (in.seen == 0) {
    --missing_;
    in.first_where = where;
    in.first = place;
  } else if (Order(where, place) < Order(in.first_where, in.first)) {
    // Topics are read one after the other: keep the earlier occurrence.
    in.first_where = where;
    in.first = place;
  }
  ++in.seen;
  if (where != Expected(in.kind)) in.seen_wrong = true;
}

Verdict Judge::Finish() const {
  Verdict v;
  v.records = static_cast<int64_t>(inputs_.size());
  v.strays = strays_;
  v.keys = static_cast<int64_t>(key_names_.size());

  for (const Input& in : inputs_) {
    if (in.seen == 0) ++v.lost;
    if (in.seen > 1) v.duplicates += in.seen - 1;
    if (in.seen_wrong) ++v.wrong_outcome;
    if (in.phase != Phase::kMeasured || in.seen == 0) continue;
    ++v.measured;
    const int64_t t = in.first.timestamp_ms;
    v.first_ms = v.first_ms < 0 ? t : std::min(v.first_ms, t);
    v.last_ms = std::max(v.last_ms, t);
    if (in.kind == Kind::kHealthy) {
      ++v.measured_healthy;
      v.last_healthy_ms = std::max(v.last_healthy_ms, t);
    }
  }
  for (const Input& in : inputs_) {
    if (in.seen == 0) continue;
    const int64_t t = in.first.timestamp_ms;
    if (in.phase == Phase::kPaced) {
      if (in.kind == Kind::kHealthy) {
        v.paced_latency_ms.push_back(static_cast<double>(t - in.place.timestamp_ms));
      }
      continue;
    }
    if (t >= v.first_ms && t <= v.last_ms) ++v.done_in_window;
    if (in.kind == Kind::kHealthy && t >= v.first_ms && t <= v.last_healthy_ms) {
      ++v.healthy_done_in_window;
    }
  }

  // Per key, its records in input order: (partition, offset), the key's
  // records all in one partition when produced by key.
  std::vector<uint32_t> order(inputs_.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Input& x = inputs_[a];
    const Input& y = inputs_[b];
    return std::tie(x.key_index, x.place.partition, x.place.offset) <
           std::tie(y.key_index, y.place.partition, y.place.offset);
  });
  size_t i = 0;
  while (i < order.size()) {
    const uint32_t key = inputs_[order[i]].key_index;
    bool have_latest = false;
    std::tuple<int64_t, int, int32_t, int64_t> latest;
    bool out_of_order = false;
    for (; i < order.size() && inputs_[order[i]].key_index == key; ++i) {
      const Input& in = inputs_[order[i]];
      if (in.seen == 0) continue;
      const auto here = Order(in.first_where, in.first);
      if (have_latest && here < latest) {
        out_of_order = true;
      } else {
        latest = here;
        have_latest = true;
      }
    }
    if (out_of_order) ++v.keys_out_of_order;
  }
  return v;
}

}  // namespace retryd::bench::peers
