#include "core/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace octo::log {
namespace {

struct State {
  int rank = -1;
  Level level = Level::Info;
  std::string subsys;  // comma-separated filter for debug output; empty = all
  std::mutex mutex;
  State() {
    if (const char* env = std::getenv("OCTO_LOG")) {
      std::string v(env);
      if (v == "debug")
        level = Level::Debug;
      else if (v == "info")
        level = Level::Info;
      else if (v == "warn")
        level = Level::Warn;
      else if (v == "error")
        level = Level::Error;
      else if (v == "quiet")
        level = Level::Quiet;
    }
    if (const char* env = std::getenv("OCTO_LOG_SUBSYS")) subsys = env;
  }
};

State& state() {
  static State s;
  return s;
}

}  // namespace

void set_rank(int rank) { state().rank = rank; }
Level level() { return state().level; }

bool enabled(Level lvl, std::string_view sub) {
  State& s = state();
  if (lvl < s.level) return false;
  if (lvl != Level::Debug || s.subsys.empty()) return true;
  std::string_view list = s.subsys;
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (list.substr(0, comma) == sub) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

void write(Level lvl, std::string_view sub, std::string_view message) {
  static const char* names[] = {"debug", "info", "warn", "error"};
  State& s = state();
  std::lock_guard lock(s.mutex);
  std::string prefix;
  if (s.rank >= 0) prefix = fmt::format("[rank {}] ", s.rank);
  if (lvl == Level::Info)
    fmt::print(stderr, "{}{}\n", prefix, message);
  else
    fmt::print(stderr, "{}{} {}: {}\n", prefix, names[static_cast<int>(lvl)], sub, message);
  std::fflush(stderr);
}

}  // namespace octo::log
